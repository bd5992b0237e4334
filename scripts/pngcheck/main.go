// Command pngcheck checks that a screenshot of a rendered page shows a
// page: it decodes a PNG and fails unless the image is large enough, the
// top of it is not blank, and it holds several distinct saturated colours
// (evidence that coloured charts were drawn, not only text).
//
// Usage:
//
//	go run ./scripts/pngcheck [flags] file.png
//
// It prints what it measured, and exits 1 when a check fails (2 on bad
// usage or an unreadable file). Standard library only.
package main

import (
	"flag"
	"fmt"
	"image"
	"image/png"
	"io"
	"math"
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	lim, path, ok := parseArgs(args, stderr)
	if !ok {
		return 2
	}
	img, err := decode(path)
	if err != nil {
		fmt.Fprintln(stderr, "pngcheck:", err)
		return 2
	}
	s := measure(img, lim.top)
	fmt.Fprintf(stdout, "pngcheck: %s: %dx%d, top %d rows %.1f%% non-white, %d distinct colours, saturated hues: %v\n",
		path, s.w, s.h, s.topRows, 100*s.ink, s.colours, s.hues)
	hues := s.huesCovering(lim.huePixels)
	fails := lim.check(s, hues)
	for _, m := range fails {
		fmt.Fprintln(stderr, "pngcheck: FAIL:", m)
	}
	if len(fails) > 0 {
		return 1
	}
	fmt.Fprintf(stdout, "pngcheck: ok (%d saturated hues)\n", hues)
	return 0
}

// limits are the checks' thresholds, from the flags.
type limits struct {
	minW, minH, top    int
	minInk             float64
	minHues, huePixels int
	minColours         int
}

// parseArgs reads the flags and the file name; ok is false on bad usage
// (already reported on stderr).
func parseArgs(args []string, stderr io.Writer) (lim limits, path string, ok bool) {
	fs := flag.NewFlagSet("pngcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&lim.minW, "min-width", 1000, "smallest acceptable width in pixels")
	fs.IntVar(&lim.minH, "min-height", 1000, "smallest acceptable height in pixels")
	fs.IntVar(&lim.top, "top", 1000, "height in pixels of the top area that must not be blank")
	fs.Float64Var(&lim.minInk, "min-ink", 0.02, "smallest share of non-white pixels in the top area")
	fs.IntVar(&lim.minHues, "min-hues", 3, "fewest distinct saturated hues (of 12) that must each cover -hue-pixels pixels")
	fs.IntVar(&lim.huePixels, "hue-pixels", 150, "pixels a hue must cover to count")
	fs.IntVar(&lim.minColours, "min-colours", 16, "fewest distinct colours (at 4 bits a channel) in the whole image")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: pngcheck [flags] file.png")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return lim, "", false
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return lim, "", false
	}
	return lim, fs.Arg(0), true
}

// decode reads the PNG at path.
func decode(path string) (image.Image, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		return nil, fmt.Errorf("%s: not a PNG: %v", path, err)
	}
	return img, nil
}

// check returns what fails the limits in s, given hues, the number of
// saturated hues that cover enough pixels.
func (lim limits) check(s stats, hues int) []string {
	var fails []string
	if s.w < lim.minW || s.h < lim.minH {
		fails = append(fails, fmt.Sprintf("image is %dx%d, want at least %dx%d", s.w, s.h, lim.minW, lim.minH))
	}
	if s.ink < lim.minInk {
		fails = append(fails, fmt.Sprintf("top area is %.2f%% non-white, want at least %.2f%% (blank page?)", 100*s.ink, 100*lim.minInk))
	}
	if s.colours < lim.minColours {
		fails = append(fails, fmt.Sprintf("%d distinct colours, want at least %d", s.colours, lim.minColours))
	}
	if hues < lim.minHues {
		fails = append(fails, fmt.Sprintf("%d saturated hues of at least %d pixels, want at least %d (charts not drawn?)", hues, lim.huePixels, lim.minHues))
	}
	return fails
}

type stats struct {
	w, h    int
	topRows int
	ink     float64 // share of non-white pixels in the top rows
	colours int     // distinct colours at 4 bits per channel
	hues    []int   // pixels per 30° hue sector, saturated pixels only
}

// huesCovering counts the hue sectors with at least pixels pixels.
func (s stats) huesCovering(pixels int) int {
	n := 0
	for _, p := range s.hues {
		if p >= pixels {
			n++
		}
	}
	return n
}

// measure measures img, taking its first top rows as the top area.
func measure(img image.Image, top int) stats {
	b := img.Bounds()
	s := stats{w: b.Dx(), h: b.Dy(), hues: make([]int, 12)}
	s.topRows = min(max(top, 0), s.h)
	seen := make(map[uint16]bool)
	var ink, topPixels int
	for y := b.Min.Y; y < b.Max.Y; y++ {
		inTop := y-b.Min.Y < s.topRows
		for x := b.Min.X; x < b.Max.X; x++ {
			r16, g16, b16, _ := img.At(x, y).RGBA()
			r, g, bl := uint8(r16>>8), uint8(g16>>8), uint8(b16>>8)
			seen[uint16(r>>4)<<8|uint16(g>>4)<<4|uint16(bl>>4)] = true
			if inTop {
				topPixels++
				if r < 245 || g < 245 || bl < 245 {
					ink++
				}
			}
			if h, ok := saturatedHue(r, g, bl); ok {
				s.hues[int(h/30)%12]++
			}
		}
	}
	if topPixels > 0 {
		s.ink = float64(ink) / float64(topPixels)
	}
	s.colours = len(seen)
	return s
}

// saturatedHue returns the hue in degrees [0, 360) of a clearly coloured
// pixel, and false for greys, near-whites and near-blacks (text and
// anti-aliasing).
func saturatedHue(r, g, b uint8) (float64, bool) {
	rf, gf, bf := float64(r)/255, float64(g)/255, float64(b)/255
	mx := math.Max(rf, math.Max(gf, bf))
	mn := math.Min(rf, math.Min(gf, bf))
	c := mx - mn
	if mx < 0.25 || c < 0.25 || c/mx < 0.4 {
		return 0, false
	}
	var h float64
	switch mx {
	case rf:
		h = math.Mod((gf-bf)/c, 6)
	case gf:
		h = (bf-rf)/c + 2
	default:
		h = (rf-gf)/c + 4
	}
	h *= 60
	if h < 0 {
		h += 360
	}
	return h, true
}
