package storesuite

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/store"
)

// Worker is what a worker process runs on.
type Worker struct {
	Store store.Store
	// Record records that worker executed key, on the server.
	Record func(ctx context.Context, key, worker string) error
	// Close closes what the worker opened, after the store.
	Close func()
}

// WorkerID returns the id of this worker process, or "" in the test
// process itself.
func WorkerID() string { return os.Getenv(envWorker) }

// WorkerMain runs worker id on what open returns (open reads the
// variables the test set in Processes.Env), prints its report, and
// returns its exit code.
func WorkerMain(id string, open func(ctx context.Context) (Worker, error)) int {
	ctx := context.Background()
	nkeys, _ := strconv.Atoi(os.Getenv(envKeys))
	w, err := open(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	defer w.Close()
	if os.Getenv(envHold) != "" {
		return holdMain(w)
	}
	rt, err := idem.New(idem.Options{Store: w.Store, Policy: idem.Policy{Lease: workerLease, Settle: workerSettle}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	rep := workerReport{Worker: id, Errors: map[string]int{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	seed, _ := strconv.Atoi(id)
	for g := range 8 {
		order := rand.New(rand.NewPCG(uint64(seed), uint64(g))).Perm(2 * nkeys)
		wg.Go(func() {
			for _, i := range order {
				key := fmt.Sprint("k", i%nkeys)
				start := time.Now()
				v, err := idem.Do(ctx, rt, key, func(ctx context.Context) (string, error) {
					if err := w.Record(ctx, key, id); err != nil {
						return "", err
					}
					time.Sleep(workerWork)
					return "value-of-" + key, nil
				})
				wait := time.Since(start)
				mu.Lock()
				rep.Calls++
				rep.MaxWait = max(rep.MaxWait, wait)
				switch {
				case err != nil:
					rep.Errors[errorClass(err)]++
				case v != "value-of-"+key:
					rep.Wrong = append(rep.Wrong, key)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	closeCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_ = rt.Close(closeCtx)
	out, _ := json.Marshal(rep)
	fmt.Println(string(out))
	return 0
}

// workerReport is what a worker prints when it is done.
type workerReport struct {
	Worker  string
	Calls   int
	Errors  map[string]int
	MaxWait time.Duration
	Wrong   []string // keys that returned another key's value
}

func errorClass(err error) string {
	switch {
	case errors.Is(err, idem.ErrConflict):
		return "conflict"
	case errors.Is(err, idem.ErrStoreUnavailable):
		return "store"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	}
	return err.Error()
}
