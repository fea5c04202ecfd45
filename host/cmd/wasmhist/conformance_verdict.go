package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// adviceReport is one finding against a rule of a later ABI minor than the
// plugin declares: reported, never a failure (abi/SPEC.md section 10).
type adviceReport struct {
	Rule   string `json:"rule"`
	Since  string `json:"since"`
	Detail string `json:"detail"`
}

// judgeCase turns a case's verdict into its report, its status in the
// table and the lines under it: the failure or skip, then each advice.
func judgeCase(c sdktest.Case, v sdktest.Verdict) (cr caseReport, status, detail string) {
	cr = caseReport{Name: c.Name, Doc: c.Doc, Result: "pass", Since: minorVersion(c.Since)}
	status = "PASS"
	var lines []string
	var failure *sdktest.Failure
	if why, ok := sdktest.IsSkipped(v.Err); ok {
		status, cr.Result, cr.Detail = "SKIP", "skip", why
		lines = append(lines, "skipped: "+why)
	} else if errors.As(v.Err, &failure) {
		status, cr.Result, cr.Reason, cr.Detail = "FAIL", "fail", string(failure.Reason), fmt.Sprint(failure.Err)
		lines = append(lines, fmt.Sprintf("reason %s: %v", failure.Reason, failure.Err))
	} else if v.Err != nil {
		status, cr.Result, cr.Detail = "FAIL", "fail", v.Err.Error()
		lines = append(lines, v.Err.Error())
	}
	for _, a := range v.Advice {
		cr.Advice = append(cr.Advice, adviceReport{Rule: string(a.Reason), Since: minorVersion(a.Since), Detail: fmt.Sprint(a.Err)})
		lines = append(lines, "advice: "+a.Error())
	}
	return cr, status, strings.Join(lines, "\n")
}

// adviceSummary is the end of the table's last line when a case advised.
func adviceSummary(r conformanceReport) string {
	if r.Advised == 0 {
		return ""
	}
	return fmt.Sprintf("; %d advice for ABI versions after %s (not failures: this plugin is judged by the rules of %s)", r.Advised, r.ABI, r.ABI)
}

func minorVersion(minor int) string { return fmt.Sprintf("%d.%d", abi.Major, minor) }
