// Command steward-promlint checks Prometheus text exposition the way `promtool check metrics` does: it
// runs client_golang's promlint (the linter promtool itself calls) on the text read from standard input
// or from each URL given, and prints one line per problem ("SOURCE: METRIC: TEXT").
//
//	steward-promlint [URL ...]    (no URL: standard input)
//
// Exit status: 0 when nothing was found, 3 when the linter found problems (promtool's "lint error"), 1
// when a source could not be read or parsed, 2 for a usage error.
package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

const (
	exitProblems = 3
	exitFailed   = 1
	exitUsage    = 2
)

func read(source string) ([]byte, error) {
	if source == "-" {
		return io.ReadAll(os.Stdin)
	}
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Get(source)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return io.ReadAll(resp.Body)
}

// lint returns the problems of one source, or an error when it cannot be read or parsed.
func lint(source string) ([]promlint.Problem, error) {
	body, err := read(source)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, fmt.Errorf("no metrics in the answer")
	}
	return promlint.New(bytes.NewReader(body)).Lint()
}

func main() {
	sources := os.Args[1:]
	for _, s := range sources {
		if strings.HasPrefix(s, "-") && s != "-" {
			fmt.Fprintln(os.Stderr, "usage: steward-promlint [URL ...]   (no URL: the exposition on standard input)")
			os.Exit(exitUsage)
		}
	}
	if len(sources) == 0 {
		sources = []string{"-"}
	}
	code := 0
	for _, source := range sources {
		problems, err := lint(source)
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: not checked: %v\n", source, err)
			code = exitFailed
			continue
		}
		for _, p := range problems {
			fmt.Printf("%s: %s: %s\n", source, p.Metric, p.Text)
		}
		if len(problems) > 0 && code == 0 {
			code = exitProblems
		}
	}
	os.Exit(code)
}
