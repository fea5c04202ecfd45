package schema

import (
	"fmt"
	"regexp"
	"regexp/syntax"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// maxRegexCost bounds the size of a regular expression a plugin's schema
// or document makes the host compile: about the instructions of its
// program, repeats expanded. Compiling is linear in it, and matching a
// string costs its length times it: `[a-z]{1000}` ten times over (110
// bytes) is 10,000 instructions, 10 s on a 100 KB string, and compiling
// four patterns of 35 KB took 18 s and 5.5 GB.
const maxRegexCost = 2000

// regexCost estimates the program size of pattern; ok is false when it
// does not parse (the library then says why).
func regexCost(pattern string) (n int, ok bool) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return 0, false
	}
	return cost1(re), true
}

func cost1(re *syntax.Regexp) int {
	n := 1
	switch re.Op {
	case syntax.OpLiteral:
		n = len(re.Rune)
	case syntax.OpRepeat:
		times := re.Max
		if times < 0 {
			times = re.Min + 1
		}
		return min(times*cost1(re.Sub[0])+1, maxRegexCost+1)
	}
	for _, s := range re.Sub {
		if n += cost1(s); n > maxRegexCost {
			return maxRegexCost + 1
		}
	}
	return n
}

// checkRegexes refuses a schema (decoded) with a "pattern", or a
// "patternProperties" name, past maxRegexCost, before the library
// compiles it (twice: once to check the schema against its meta-schema).
func checkRegexes(v any) error {
	switch v := v.(type) {
	case map[string]any:
		if p, ok := v["pattern"].(string); ok {
			if err := regexBounded(p); err != nil {
				return err
			}
		}
		if pp, ok := v["patternProperties"].(map[string]any); ok {
			for p := range pp {
				if err := regexBounded(p); err != nil {
					return err
				}
			}
		}
		for k, e := range v {
			switch k {
			case "const", "enum", "default", "examples":
				continue // values of documents, not schemas
			}
			if err := checkRegexes(e); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range v {
			if err := checkRegexes(e); err != nil {
				return err
			}
		}
	}
	return nil
}

func regexBounded(p string) error {
	if n, ok := regexCost(p); ok && n > maxRegexCost {
		q := p
		if len(q) > 40 {
			q = q[:36] + "..."
		}
		return fmt.Errorf("pattern %q: its program passes %d instructions (repeats expanded), which the host does not compile or run: write a shorter pattern", q, maxRegexCost)
	}
	return nil
}

// isBoundedRegex is the "regex" format of a plugin's schema: a string of a
// document is compiled only within maxRegexCost.
// maxRegexText is the longest string format regex parses.
const maxRegexText = 16 << 10

func isBoundedRegex(v any) bool {
	s, ok := v.(string)
	if !ok {
		return true
	}
	// No pattern within maxRegexCost is longer: a literal is an
	// instruction a character. Parsing 7 MiB took 14 s.
	if len(s) > maxRegexText {
		return false
	}
	if n, ok := regexCost(s); !ok || n > maxRegexCost {
		return false
	}
	_, err := regexp.Compile(s)
	return err == nil
}

// maxPatternWork bounds one match of a plugin schema's pattern: the
// string's length times the pattern's program size (regexCost). Package
// regexp matches in time linear in both, about 10^8 of their product a
// second here: a 2,000-instruction pattern against a 4 MiB string would be
// one step of 8 s, which no count or deadline interrupts.
const maxPatternWork = 1 << 27

// boundedPattern is a plugin schema's "pattern" keyword: it matches a
// string only within maxPatternWork, and fails as the library's keyword
// does otherwise.
type boundedPattern struct {
	re   *regexp.Regexp
	cost int
}

func (p boundedPattern) Validate(ctx jsonschema.ValidationContext, v any) error {
	s, ok := v.(string)
	if !ok {
		return nil
	}
	if len(s)*p.cost > maxPatternWork {
		return ctx.Error("pattern", "a string of %d bytes is too long to match against pattern %s (about %d instructions) within the host's bound: shorten the string or the pattern", len(s), quote(p.re.String()), p.cost)
	}
	if !p.re.MatchString(s) {
		return ctx.Error("pattern", "does not match pattern %s", quote(p.re.String()))
	}
	return nil
}

// boundPatterns gives every pattern under root that is not checked by
// hand (checkPatternsByHand, which runs first) its boundedPattern.
func boundPatterns(root *jsonschema.Schema) {
	walkSchemas(root, func(s *jsonschema.Schema) bool {
		if s.Pattern == nil {
			return true
		}
		n, _ := regexCost(s.Pattern.String())
		if s.Extensions == nil {
			s.Extensions = map[string]jsonschema.ExtSchema{}
		}
		s.Extensions["pattern"] = boundedPattern{re: s.Pattern, cost: max(n, 1)}
		s.Pattern = nil
		return true
	})
}
