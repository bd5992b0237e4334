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
	fs := flag.NewFlagSet("pngcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	minW := fs.Int("min-width", 1000, "smallest acceptable width in pixels")
	minH := fs.Int("min-height", 1000, "smallest acceptable height in pixels")
	top := fs.Int("top", 1000, "height in pixels of the top area that must not be blank")
	minInk := fs.Float64("min-ink", 0.02, "smallest share of non-white pixels in the top area")
	minHues := fs.Int("min-hues", 3, "fewest distinct saturated hues (of 12) that must each cover -hue-pixels pixels")
	huePixels := fs.Int("hue-pixels", 150, "pixels a hue must cover to count")
	minColours := fs.Int("min-colours", 16, "fewest distinct colours (at 4 bits a channel) in the whole image")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: pngcheck [flags] file.png")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	path := fs.Arg(0)
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintln(stderr, "pngcheck:", err)
		return 2
	}
	img, err := png.Decode(f)
	f.Close()
	if err != nil {
		fmt.Fprintf(stderr, "pngcheck: %s: not a PNG: %v\n", path, err)
		return 2
	}
	s := measure(img, *top)
	fmt.Fprintf(stdout, "pngcheck: %s: %dx%d, top %d rows %.1f%% non-white, %d distinct colours, saturated hues: %v\n",
		path, s.w, s.h, s.topRows, 100*s.ink, s.colours, s.hues)

	var fails []string
	if s.w < *minW || s.h < *minH {
		fails = append(fails, fmt.Sprintf("image is %dx%d, want at least %dx%d", s.w, s.h, *minW, *minH))
	}
	if s.ink < *minInk {
		fails = append(fails, fmt.Sprintf("top area is %.2f%% non-white, want at least %.2f%% (blank page?)", 100*s.ink, 100**minInk))
	}
	if s.colours < *minColours {
		fails = append(fails, fmt.Sprintf("%d distinct colours, want at least %d", s.colours, *minColours))
	}
	hues := 0
	for _, n := range s.hues {
		if n >= *huePixels {
			hues++
		}
	}
	if hues < *minHues {
		fails = append(fails, fmt.Sprintf("%d saturated hues of at least %d pixels, want at least %d (charts not drawn?)", hues, *huePixels, *minHues))
	}
	for _, m := range fails {
		fmt.Fprintln(stderr, "pngcheck: FAIL:", m)
	}
	if len(fails) > 0 {
		return 1
	}
	fmt.Fprintf(stdout, "pngcheck: ok (%d saturated hues)\n", hues)
	return 0
}

type stats struct {
	w, h    int
	topRows int
	ink     float64 // share of non-white pixels in the top rows
	colours int     // distinct colours at 4 bits per channel
	hues    []int   // pixels per 30° hue sector, saturated pixels only
}

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
