package storetest

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/idemrt/idem/store"
)

// explain describes a history that is not linearizable: it writes
// porcupine's visualisation of the whole history and of a reduced one (the
// shortest failing prefix on one key, without the reads it needs not), and
// lists the calls of the reduced one.
func explain(model porcupine.Model, ops []porcupine.Operation, notes []porcupine.Annotation, dir string) string {
	var b strings.Builder
	var err error
	if dir == "" {
		dir, err = os.MkdirTemp("", "idem-linearize-")
	}
	visualise := func(name string, ops []porcupine.Operation) {
		if err != nil {
			return
		}
		_, info := porcupine.CheckOperationsVerbose(model, ops, time.Minute)
		info.AddAnnotations(notes)
		path := filepath.Join(dir, name)
		if err = porcupine.VisualizePath(model, info, path); err == nil {
			fmt.Fprintf(&b, "Visualisation: %s\n", path)
		}
	}
	visualise("history.html", ops)
	for _, part := range model.Partition(ops) {
		if porcupine.CheckOperationsTimeout(model, part, time.Minute) != porcupine.Illegal {
			continue
		}
		prefix := dropObservers(model, shortestIllegalPrefix(model, part))
		visualise("shortest.html", prefix)
		fmt.Fprintf(&b, "The calls on key %s cut to a history that still fails, %d of %d "+
			"(times in µs from the start; ∞: outcome unknown, or still running at the cut):\n",
			keyOf(part), len(prefix), len(part))
		for _, op := range prefix {
			ret := "∞"
			if op.Return != math.MaxInt64 {
				ret = fmt.Sprint(op.Return / 1000)
			}
			fmt.Fprintf(&b, "  [%d, %s] c%d %s\n", op.Call/1000, ret, op.ClientId, model.DescribeOperation(op.Input, op.Output))
		}
		break
	}
	if err != nil {
		fmt.Fprintf(&b, "(no visualisation: %v)\n", err)
	}
	return b.String()
}

func keyOf(part []porcupine.Operation) string {
	for _, op := range part {
		if k := op.Input.(LinearInput).Key; k != "" {
			return k
		}
	}
	return ""
}

// shortestIllegalPrefix cuts a history that is not linearizable at the
// earliest time at which it already is not: the calls made by then, those
// still running at the cut counted as of unknown outcome. Every prefix of a
// linearizable history is linearizable, so the cut history is as much a
// proof of the violation as the whole one.
func shortestIllegalPrefix(model porcupine.Model, ops []porcupine.Operation) []porcupine.Operation {
	var cuts []int64
	for _, op := range ops {
		if op.Return != math.MaxInt64 {
			cuts = append(cuts, op.Return)
		}
	}
	sort.Slice(cuts, func(i, j int) bool { return cuts[i] < cuts[j] })
	prefix := func(cut int64) []porcupine.Operation {
		var out []porcupine.Operation
		for _, op := range ops {
			if op.Call > cut {
				continue
			}
			if op.Return > cut {
				op.Output, op.Return = LinearOutput{Unknown: true}, math.MaxInt64
			}
			out = append(out, op)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Call < out[j].Call })
		return out
	}
	i := sort.Search(len(cuts), func(i int) bool {
		return porcupine.CheckOperationsTimeout(model, prefix(cuts[i]), time.Minute) == porcupine.Illegal
	})
	if i == len(cuts) {
		return prefix(math.MaxInt64)
	}
	return prefix(cuts[i])
}

// dropObservers removes, one by one, the calls that change no state in the
// model (a Get, a claim that found the key taken, a call refused with an
// error) while the history stays illegal. Removing such a call only removes
// a constraint (at most it leaves a fence unknown that it pinned), so what
// remains is still a proof of the violation.
func dropObservers(model porcupine.Model, ops []porcupine.Operation) []porcupine.Operation {
	for i := len(ops) - 1; i >= 0; i-- {
		in, out := ops[i].Input.(LinearInput), ops[i].Output.(LinearOutput)
		observer := !out.Unknown && in.Kind != 0 &&
			(in.Kind == store.OpGet || out.Err != NoError || in.Kind == store.OpClaim && out.Status != store.Claimed)
		if !observer {
			continue
		}
		rest := append(append([]porcupine.Operation(nil), ops[:i]...), ops[i+1:]...)
		if porcupine.CheckOperationsTimeout(model, rest, time.Minute) == porcupine.Illegal {
			ops = rest
		}
	}
	return ops
}
