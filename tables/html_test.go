package tables

import (
	"context"
	"errors"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// writeTablesSummary writes workerRun with a summary.
func writeTablesSummary(t *testing.T, dir string, sum Summary, sumErr error) {
	t.Helper()
	s := New(dir)
	s.SetSummary(func() (Summary, error) { return sum, sumErr })
	for _, r := range workerRun() {
		if err := s.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// The page is self-contained (no URL but data: ones, no script), escapes what comes from the
// artifact, inlines every picture the manifest lists and groups them.
func TestTablesIndexSelfContained(t *testing.T) {
	dir := t.TempDir()
	writeTablesSummary(t, dir, Summary{Text: "Case c1 <script>alert(1)</script> & more", SLO: "cli: ttft p95 <= 500 ms"}, nil)
	page := readFile(t, filepath.Join(dir, IndexFile))
	if strings.Contains(page, "<script") || !strings.Contains(page, "&lt;script&gt;alert(1)&lt;/script&gt; &amp; more") {
		t.Errorf("summary not escaped")
	}
	if m := regexp.MustCompile(`(?i)(src|href)="([^"d]|d[^a])`).FindString(page); m != "" || strings.Contains(page, "<link") {
		t.Errorf("page refers outside itself: %q", m)
	}
	imgs := strings.Count(page, `<img src="data:image/png;base64,`)
	var pngs int
	for _, d := range []string{RequestPlotsDir, WorkerPlotsDir} {
		m, _ := filepath.Glob(filepath.Join(dir, d, "*.png"))
		pngs += len(m)
	}
	if imgs != pngs || imgs != 22 {
		t.Errorf("page inlines %d pictures, the directory holds %d (want 22)", imgs, pngs)
	}
	for _, h := range []string{"<h2>request</h2>", "<h2>server decomposition</h2>", "<h2>workers</h2>", "<h2>batches</h2>", whyNoSteps, "cli: ttft p95 &lt;= 500 ms"} {
		if !strings.Contains(page, h) {
			t.Errorf("page lacks %q", h)
		}
	}
	if strings.Index(page, "<h2>request</h2>") > strings.Index(page, "<h2>workers</h2>") {
		t.Error("groups out of order")
	}
	dir2 := t.TempDir()
	writeTablesSummary(t, dir2, Summary{}, errors.New("artifact <x> unreadable"))
	if page := readFile(t, filepath.Join(dir2, IndexFile)); !strings.Contains(page, "The summary could not be computed: artifact &lt;x&gt; unreadable") {
		t.Error("summary error not shown")
	}
}

// TestTablesIndexChromium renders index.html in headless Chromium to a 1200 × 3000 PNG and
// checks that the screenshot is a picture with content. Skipped without chromium unless CI is
// set. TABLES_SCREENSHOT=PATH keeps the screenshot (to look at it).
func TestTablesIndexChromium(t *testing.T) {
	bin, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skip("chromium is not installed (apt-get install chromium); CI requires it")
		}
		t.Fatal("chromium is required under CI: ", err)
	}
	dir := t.TempDir()
	writeTablesSummary(t, dir, Summary{Text: "Case c1: 4 measured requests\n  ttft p50 120 ms", SLO: "cli:\n  ttft_ms p95 <= 500"}, nil)
	shot := filepath.Join(t.TempDir(), "index.png")
	if p := os.Getenv("TABLES_SCREENSHOT"); p != "" {
		shot = p
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--user-data-dir="+t.TempDir(), "--screenshot="+shot, "--window-size=1200,3000",
		"file://"+filepath.Join(dir, IndexFile))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 1200 || b.Dy() != 3000 {
		t.Errorf("screenshot is %v, want 1200 × 3000", b)
	}
	if dark := darkShare(img); dark < 0.01 {
		t.Errorf("screenshot is blank: %.4f of its pixels are dark", dark)
	}
}

// darkShare is the share of pixels whose luminance is below half.
func darkShare(img image.Image) float64 {
	b := img.Bounds()
	var dark, all int
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, _ := img.At(x, y).RGBA()
			if (r+g+bl)/3 < 0x8000 {
				dark++
			}
			all++
		}
	}
	return float64(dark) / float64(all)
}
