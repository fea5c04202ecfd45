package schema

import (
	"fmt"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/wasmhist/wasmhist/schemas"
)

// Steps bound how much a validation evaluates, not what the library does
// between two of them when a subschema fails. Each error it builds holds
// the keyword location of the failure, which it writes out again from the
// root, one piece per subschema the evaluation nests (a member, an
// element, a $ref, an allOf branch each), by appending to a string: a
// failure n levels deep costs n² bytes of copying, and a document that
// fails at every level of n costs n³ (a plugin schema recursing through
// one property, and a document 1,500 levels deep: 11 s and 20 GB; a chain
// of 2,000 $ref and a three-byte document: 3.6 s). And it keeps every
// error until the validation ends: a 7 MB array of four million wrong
// elements held 2.6 GB.
//
// So every subschema of a guarded schema is split in two: a wrapper in
// its place, which every reference to it reaches, and whose one keyword
// (enter) evaluates the subschema's own keywords, moved to inner. enter
// runs before anything nests below it, and sees whether its subschema
// failed:
//   - a validation nests at most maxDepth evaluations, which the schema's
//     longest path piece sets so that one failure at that depth copies at
//     most nestingWork bytes (at most maxNesting);
//   - the errors a validation still holds are estimated as it goes (a
//     subschema that passes discards what failed below it, such as an
//     anyOf's other branches); past maxFailureBytes the validation stops
//     and reports its last failure.
//
// RATIONALE: "Why does a plugin's schema bound how deep a validation
// nests and what its failures hold?"
const (
	maxNesting      = 256
	nestingWork     = 2 << 20
	maxFailureBytes = 128 << 20
	// errorBytes is what one error holds beside its strings: itself and
	// its place in its parent's list.
	errorBytes = 112
	// maxFailureWork bounds the bytes the keyword locations of a
	// validation's failures copy, and workCheckEvery is how many pass
	// between two looks at the context, which steps do not see.
	maxFailureWork = 1 << 30
	workCheckEvery = 16 << 20
	// maxPiece bounds a piece of keyword location, so that the nesting
	// allowed stays above 16.
	maxPiece = 8 << 10
)

// enter is the one keyword of a wrapper.
type enter struct {
	r     *run
	inner *jsonschema.Schema
	// unique: inner has uniqueItems.
	unique bool
	// keyCost is the sizes of inner's patternProperties names summed:
	// the library matches every member name against each.
	keyCost int
}

func (e enter) Validate(ctx jsonschema.ValidationContext, v any) error {
	r := e.r
	if r.depth >= r.maxDepth {
		r.deepAt = ctx.Error("", "").InstanceLocation
		panic(stopped{kind: stopDeep})
	}
	if m, ok := v.(map[string]any); ok && e.keyCost > 0 {
		for k := range m {
			if len(k)*e.keyCost > maxPatternWork {
				return ctx.Error("patternProperties", "a member name of %d bytes is too long to match against patternProperties of about %d instructions in all within the host's bound: shorten the name or the patterns", len(k), e.keyCost)
			}
		}
	}
	if a, ok := v.([]any); ok && e.unique {
		// The library compares up to 20 elements pair by pair, and hashes
		// more; either reads each element whole, in one step.
		w := compareCost(a)
		if len(a) <= 20 {
			w *= max(1, len(a)/2)
		}
		if w > maxCompareSteps {
			return ctx.Error("uniqueItems", "an array of %d elements whose comparison would take about %d steps is too large to check for unique items within the host's bound of %d: shorten it", len(a), w, maxCompareSteps)
		}
		r.tick(nil, w)
	}
	r.depth++
	mark := r.held
	err := ctx.Validate(e.inner, "", v, "")
	k := r.depth
	r.depth--
	// What failed below and the library discarded is no longer held:
	// all of it when inner passed, what its failure does not keep when
	// it failed.
	if err == nil {
		r.held = mark
		return nil
	}
	r.failures++
	r.held = mark + r.count(err, k)
	switch {
	case r.held > maxFailureBytes:
		r.last = err
		panic(stopped{kind: stopHeld})
	case r.work > maxFailureWork:
		r.last = err
		panic(stopped{kind: stopWork})
	case r.work >= r.workCheck:
		r.workCheck = r.work + workCheckEvery
		if r.ctx != nil {
			if err := r.ctx.Err(); err != nil {
				panic(stopped{kind: stopContext, err: err})
			}
		}
	}
	return err
}

// maxCompareSteps bounds what checking one array for unique items may
// take (compareCost), in steps.
const maxCompareSteps = 1 << 22

// compareCost is size with a number weighing what parsing it for a
// comparison costs: the library parses both numbers of each comparison
// into fractions, and 1e1000 takes about 6 µs.
func compareCost(v any) int { return weigh(v, 0, true, maxCompareSteps+1) }

// counted marks an error a wrapper has counted, followed by the bytes its
// tree holds: it replaces the error's relative keyword location, which
// nothing here reads (convert reports the absolute one), and so frees
// what that held.
const counted = "\x00"

// count returns what the tree of a failure k wrappers deep holds, and
// adds what building the errors no wrapper counted yet copied: each
// error's strings (its message may quote a long value or a long list of
// the schema's), and its keyword location once per level it was written
// out over. An error counted before reads its tree from its mark.
func (r *run) count(err error, k int) int {
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return errorBytes
	}
	var walk func(e *jsonschema.ValidationError) int
	walk = func(e *jsonschema.ValidationError) int {
		if n, ok := strings.CutPrefix(e.KeywordLocation, counted); ok {
			held, _ := strconv.Atoi(n)
			return held
		}
		// Building a message copies what it quotes a few times over.
		r.work += len(e.KeywordLocation)*k + 4*len(e.Message)
		held := errorBytes + len(e.Message) + len(e.InstanceLocation) + len(e.AbsoluteKeywordLocation) + 8*len(e.Causes)
		for _, c := range e.Causes {
			held += walk(c)
		}
		e.KeywordLocation = counted + strconv.Itoa(held)
		return held
	}
	return walk(ve)
}

// nest splits every subschema under root (root too) into a wrapper and
// its inner schema, each wrapper's enter counting on r, and sets r's
// bounds for the schema. Nothing else walks the schema afterwards but
// Local, which looks through wrappers (unwrap).
func nest(root *jsonschema.Schema, r *run) {
	var all []*jsonschema.Schema
	perElement := map[*jsonschema.Schema]bool{}
	walkSchemas(root, func(s *jsonschema.Schema) bool {
		all = append(all, s)
		for _, c := range elementSchemas(s) {
			perElement[c] = true
		}
		return true
	})
	// The project's schemas, which a plugin's may name, are the host's:
	// none recurses, and each is a few levels deep, so a wrapper where
	// they evaluate each element of an array or member of an object is
	// enough to count what they build. Wrapping all of them doubles what
	// a turn's check of the messages it appends costs.
	all = slices.DeleteFunc(all, func(s *jsonschema.Schema) bool {
		return strings.HasPrefix(s.Location, schemas.BaseID) && !perElement[s]
	})
	// Each level adds the link's piece and the wrapper's empty one.
	// Compile refuses a piece past maxPiece (checkPieces).
	r.locPer = schemaPiece(root) + 2
	r.maxDepth = min(maxNesting, int(math.Sqrt(float64(nestingWork/r.locPer))))
	for _, s := range all {
		inner := new(jsonschema.Schema)
		*inner = *s
		*s = jsonschema.Schema{
			Location: inner.Location, Draft: inner.Draft,
			// A dynamic scope finds its anchors on the schemas it passed,
			// the wrapper first.
			RecursiveAnchor: inner.RecursiveAnchor, DynamicAnchor: inner.DynamicAnchor,
			MinProperties: -1, MaxProperties: -1, MinItems: -1, MaxItems: -1,
			MinContains: 1, MaxContains: -1, MinLength: -1, MaxLength: -1,
			Extensions: map[string]jsonschema.ExtSchema{"wasmhist-enter": enter{
				r: r, inner: inner, keyCost: keyCost(inner), unique: inner.UniqueItems,
			}},
		}
	}
}

// checkPieces refuses a schema with a piece of keyword location past
// maxPiece: a property name, a pattern or a dependency name so long that
// hardly any nesting would be allowed.
func checkPieces(root *jsonschema.Schema) error {
	if piece := schemaPiece(root); piece > maxPiece {
		return fmt.Errorf("a property name, pattern or dependency name of %d bytes (escaped) makes each level of a failure's location too long; at most %d", piece, maxPiece)
	}
	return nil
}

// unwrap is the schema whose keywords a wrapper stands for (s itself
// when s is none).
func unwrap(s *jsonschema.Schema) *jsonschema.Schema {
	if s == nil {
		return nil
	}
	if e, ok := s.Extensions["wasmhist-enter"].(enter); ok {
		return e.inner
	}
	return s
}

// keyCostOf is keyCost of the schema w stands for, as its wrapper
// computed it when the schema compiled.
func keyCostOf(w *jsonschema.Schema) int {
	if e, ok := w.Extensions["wasmhist-enter"].(enter); ok {
		return e.keyCost
	}
	return keyCost(w)
}

// keyCost is what matching one byte of a member name against every
// patternProperties name of s costs: their sizes summed.
func keyCost(s *jsonschema.Schema) int {
	n := 0
	for re := range s.PatternProperties {
		c, _ := regexCost(re.String())
		n += max(c, 1)
	}
	return n
}

// elementSchemas lists the schemas s evaluates once for each element
// of an array or member of an object it does not name.
func elementSchemas(s *jsonschema.Schema) []*jsonschema.Schema {
	out := []*jsonschema.Schema{s.Items2020, s.UnevaluatedItems, s.Contains, s.UnevaluatedProperties, s.PropertyNames}
	out = append(out, s.PrefixItems...)
	for _, c := range s.PatternProperties {
		out = append(out, c)
	}
	return append(out, schemasIn(s.AdditionalProperties, s.Items, s.AdditionalItems)...)
}

// schemaPiece is longestPiece over every schema under root.
func schemaPiece(root *jsonschema.Schema) int {
	piece := 0
	walkSchemas(root, func(s *jsonschema.Schema) bool {
		piece = max(piece, longestPiece(s))
		return true
	})
	return piece
}

// longestPiece is the longest piece a link from s adds to a keyword
// location, escaped as the library escapes it.
func longestPiece(s *jsonschema.Schema) int {
	n := len("unevaluatedProperties")
	for _, list := range [][]*jsonschema.Schema{s.AllOf, s.AnyOf, s.OneOf, s.PrefixItems} {
		n = max(n, len("prefixItems/")+len(strconv.Itoa(len(list))))
	}
	if items, ok := s.Items.([]*jsonschema.Schema); ok {
		n = max(n, len("items/")+len(strconv.Itoa(len(items))))
	}
	for k := range s.Properties {
		n = max(n, len("properties/")+escapedLen(k))
	}
	for re := range s.PatternProperties {
		n = max(n, len("patternProperties/")+escapedLen(re.String()))
	}
	for k := range s.DependentSchemas {
		n = max(n, len("dependentSchemas/")+escapedLen(k))
	}
	for k := range s.Dependencies {
		n = max(n, len("dependencies/")+escapedLen(k))
	}
	return n
}

func escapedLen(token string) int {
	token = strings.ReplaceAll(token, "~", "~0")
	token = strings.ReplaceAll(token, "/", "~1")
	return len(url.PathEscape(token))
}
