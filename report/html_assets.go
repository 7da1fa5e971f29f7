package report

import (
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"fmt"
	"html/template"
	"strconv"
	"strings"

	"github.com/gymlens/gymlens/contract"
)

// The page's fixed parts, embedded from assets/: its only script, its
// style sheet and the template that lays out an htmlPage.

// pageScript is the page's only script: it shows the buttons that open or
// close every waterfall. Everything else works without it. The
// Content-Security-Policy allows this script by its hash and nothing else.
//
//go:embed assets/page.js
var pageScript string

// pageStyle is the page's inline style sheet; its service colours are the
// classes s0 to s(paletteSize-1).
//
//go:embed assets/page.css
var pageStyle string

// pageHTML is the page template. CSP_PLACEHOLDER in it is replaced by
// pageCSP before it is parsed.
//
//go:embed assets/page.html.tmpl
var pageHTML string

// pageCSP is the page's Content-Security-Policy: nothing may be loaded
// from anywhere, styles are inline, and the one script runs by its hash.
var pageCSP = func() string {
	sum := sha256.Sum256([]byte(pageScript))
	return "default-src 'none'; style-src 'unsafe-inline'; script-src 'sha256-" +
		base64.StdEncoding.EncodeToString(sum[:]) + "'; base-uri 'none'; form-action 'none'"
}()

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"n":      func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) },
	"name":   templateName,
	"style":  func() template.CSS { return template.CSS(pageStyle) },
	"script": func() template.JS { return template.JS(pageScript) },
}).Parse(strings.Replace(pageHTML, "CSP_PLACEHOLDER", pageCSP, 1)))

// templateNames are the contract names the page's fixed text mentions.
var templateNames = map[string]string{
	"VerifyCalls":               contract.VerifyCalls,
	"VerifySuccessRate":         contract.VerifySuccessRate,
	"HTTPServerRequestDuration": contract.HTTPServerRequestDuration,
	"ServersActive":             contract.ServersActive,
	"SpanRollout":               contract.SpanRollout,
}

// templateName returns the contract name the template asks for by key; a
// key missing here fails the page's rendering, and so every test of it.
func templateName(key string) (string, error) {
	if v, ok := templateNames[key]; ok {
		return v, nil
	}
	return "", fmt.Errorf("no contract name %q", key)
}
