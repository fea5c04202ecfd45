package schema

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// A plugin's schema is the plugin's input to the host, and the validator
// runs it on the host's goroutine. MaxSchemaCost bounds what a schema
// costs per value when it compiles, counting a recursion once; a schema
// that recurses along two paths at each level (an allOf of two branches
// that both name the schema again for the same member) escapes it, and
// costs 2^depth per value of a deep enough document. So every validation
// with a plugin's schema is counted as it runs: each subschema it
// evaluates is one step, and one more per member or element of the value
// it evaluates, and per bytesPerStep bytes of a string it reads whole.
// Evaluated once per path, as MaxSchemaCost counts, a schema of cost c
// takes at most c steps per value, member, element and bytesPerStep bytes
// of string: a validation stops once its steps pass baseSteps and twice
// that for its document (only a schema that evaluates subschemas along
// more paths than it has, which is what a doubling recursion does, gets
// there), or when the context it runs under ends (RATIONALE: "Why does
// validating with a plugin's schema count its steps?").
//
// The library has no hook for either: a step is an extension keyword
// every subschema carries, which the library runs after the subschema's
// other keywords, and stopping is a panic that unwinds the library's
// recursion (its own recover passes it on). A count belongs to one
// validation, so each goroutine validating at a time has a compiled copy
// of the schema of its own (guard).
const (
	// baseSteps is what any document may take: more than a schema at
	// MaxSchemaCost takes for one value.
	baseSteps = 1 << 18
	// checkEvery is how many steps pass between two looks at the clock
	// and the count.
	checkEvery = 1 << 10
	// bytesPerStep: a subschema that reads a string whole counts a step
	// more per so many of its bytes.
	bytesPerStep = 64
	// maxSteps bounds every validation, whatever its schema's cost and
	// its document's size: a schema's cost counts subschemas the document
	// may never reach, which a plugin can add to raise the limit.
	maxSteps = 1 << 26
)

// ErrTooCostly is wrapped by the error of a validation stopped for its
// steps. It is a ValidationError too: the document is refused.
var ErrTooCostly = fmt.Errorf("%w: validation stopped", ErrInvalid)

// run counts the steps of one validation.
type run struct {
	// cost is the schema's (MaxSchemaCost), fixed for the copy.
	cost    int
	ctx     context.Context
	doc     any // counted once the base is spent
	steps   int
	check   int // the steps at which the run next looks at its context and count
	limit   int
	counted bool

	// maxDepth and locPer are the schema's, fixed for the copy
	// (nesting.go): how deep evaluations may nest, and how many bytes of
	// keyword location a level adds at most.
	maxDepth int
	locPer   int
	// depth is how deep the evaluation in progress nests; held estimates
	// the bytes the failures found so far hold, of which there were
	// failures; last is the failure that stopped the run at
	// maxFailureBytes, deepAt the instance location where it stopped at
	// maxDepth.
	depth    int
	held     int
	failures int
	last     error
	deepAt   string
	// work is the bytes the failures' keyword locations copied;
	// workCheck when the context is next looked at for it.
	work      int
	workCheck int
	// pathSteps is what each step counts more for the document's longest
	// instance location, which the library writes out again for each
	// member and element below it (pathBytes).
	pathSteps int
}

// stopped is the panic that ends a run, and why: err is the context's
// error for stopContext.
type stopped struct {
	kind stopKind
	err  error
}

type stopKind int

const (
	stopCount stopKind = iota
	stopContext
	stopDeep
	stopHeld
	stopWork
)

func (r *run) start(ctx context.Context, doc any) {
	*r = run{cost: r.cost, maxDepth: r.maxDepth, locPer: r.locPer, ctx: ctx, doc: doc, check: checkEvery, limit: baseSteps, workCheck: workCheckEvery,
		pathSteps: pathBytes(doc) / pathBytesPerStep}
}

// pathBytesPerStep: a step counts one more per so many bytes of the
// document's longest instance location (a 16 MiB member name above a
// thousand elements had them copy 16 GB).
const pathBytesPerStep = 16 << 10

// pathBytes bounds the longest instance location in v: a member name
// escaped (three bytes at most for each of its bytes), an index, and a
// slash each. A value nested past maxWalkDepth (no decoded document is;
// a Go value that contains itself never ends) counts as a location past
// any bound.
func pathBytes(v any) int { return pathBytesAt(v, 0) }

// maxWalkDepth is deeper than any JSON the host decodes (encoding/json
// stops at 10,000).
const maxWalkDepth = 10_001

func pathBytesAt(v any, depth int) int {
	if depth > maxWalkDepth {
		return maxSteps * pathBytesPerStep
	}
	n := 0
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			n = max(n, 1+3*len(k)+pathBytesAt(e, depth+1))
		}
	case []any:
		for _, e := range v {
			n = max(n, 1+len(strconv.Itoa(len(v)))+pathBytesAt(e, depth+1))
		}
	}
	return min(n, maxSteps*pathBytesPerStep)
}

// tick counts a subschema evaluated on v: one step, extra more, and one
// more for each member or element of v, for which the validator does as
// much work again at each evaluation (it keeps a set of them, for
// unevaluated*).
func (r *run) tick(v any, extra int) {
	w := 1 + extra
	switch v := v.(type) {
	case map[string]any:
		w += len(v)
	case []any:
		w += len(v)
	}
	r.steps += w + r.pathSteps
	if r.steps < r.check {
		return
	}
	r.check = r.steps + checkEvery
	if r.ctx != nil {
		if err := r.ctx.Err(); err != nil {
			panic(stopped{kind: stopContext, err: err})
		}
	}
	if r.steps < r.limit {
		return
	}
	if !r.counted {
		r.counted = true
		r.limit = min(max(r.limit, 2*max(r.cost, 1)*size(r.doc)), maxSteps)
		if r.steps < r.limit {
			return
		}
	}
	panic(stopped{kind: stopCount})
}

// size is what a schema of cost 1 counts on a decoded document: a step for
// each value, for each member or element, and for each bytesPerStep bytes
// of a string or member name.
func size(v any) int { return weigh(v, 0, false, maxSteps) }

// weigh is size, with a number weighing what parsing it for a comparison
// costs when numbers is set (compareCost), and saturating at most.
func weigh(v any, depth int, numbers bool, most int) int {
	if depth > maxWalkDepth {
		return most // a value that contains itself (pathBytes)
	}
	n := 1
	switch v := v.(type) {
	case json.Number:
		if numbers {
			n += len(v) / 8
			if i := strings.IndexAny(string(v), "eE"); i >= 0 {
				exp, _ := strconv.Atoi(strings.TrimPrefix(string(v[i+1:]), "+"))
				n += max(exp, -exp) / 32
			}
		}
	case map[string]any:
		for k, e := range v {
			n += 1 + len(k)/bytesPerStep + weigh(e, depth+1, numbers, most)
		}
	case []any:
		for _, e := range v {
			n += 1 + weigh(e, depth+1, numbers, most)
		}
	case string:
		n += len(v) / bytesPerStep
	}
	return min(n, most)
}

// step is the extension every subschema of a guarded schema carries.
// perByte: the subschema reads a string whole (a format, a pattern, an
// enum or const, a content keyword), and quotes it whole in a failure.
//
// own is what the subschema's keywords read of the schema itself at each
// evaluation (ownSteps); patterns and quotesNames say what they read of
// the value beyond its members: each member name is matched against every
// patternProperties name, and additionalProperties false quotes the names
// it refuses. (uniqueItems, which compares elements whole, is counted
// before it runs: enter.)
type step struct {
	r           *run
	perByte     bool
	own         int
	quotesNames bool
	patterns    int
}

func (s step) Validate(_ jsonschema.ValidationContext, v any) error {
	w := s.own
	switch v := v.(type) {
	case string:
		if s.perByte {
			w += len(v) / bytesPerStep
		}
	case map[string]any:
		w += len(v) * s.patterns
		if s.quotesNames {
			for k := range v {
				w += len(k) / bytesPerStep
			}
		}
	}
	s.r.tick(v, w)
	return nil
}

// ownSteps is what the keywords of s read of the schema at each
// evaluation, in steps: the properties it names, the names it requires,
// its dependencies, and its enum and const values, as size counts a
// document (an enum of 20,000 numbers parses two numbers per value).
func ownSteps(s *jsonschema.Schema) int {
	n := len(s.Properties) + len(s.Required) + len(s.Dependencies) + len(s.DependentSchemas)
	for _, names := range s.DependentRequired {
		n += len(names)
	}
	for _, e := range s.Enum {
		n += size(e)
	}
	for _, c := range s.Constant {
		n += size(c)
	}
	return n
}

// guard holds the compiled copies of a plugin's schema, each with its own
// run. The first (primary) is the Schema's own, which Local walks; one
// more is compiled when validations overlap, and kept for the next.
type guard struct {
	raw  json.RawMessage
	name string
	cost int

	mu          sync.Mutex
	primary     *guarded
	primaryBusy bool
	free        []*guarded
}

// maxFreeCopies bounds the copies a guard keeps beside the primary: as
// many as validations have overlapped, up to it.
const maxFreeCopies = 64

type guarded struct {
	root *jsonschema.Schema
	r    *run
}

// guardSteps gives every subschema under root a step of r.
func guardSteps(root *jsonschema.Schema, r *run) {
	walkSchemas(root, func(s *jsonschema.Schema) bool {
		if s.Extensions == nil {
			s.Extensions = map[string]jsonschema.ExtSchema{}
		}
		_, pattern := s.Extensions["pattern"] // handPattern, boundedPattern
		// These read a string whole, and a failure quotes it whole.
		perByte := s.Format != "" || s.Pattern != nil || pattern || len(s.Enum) > 0 || len(s.Constant) > 0 ||
			s.ContentEncoding != "" || s.ContentMediaType != "" || s.MinLength >= 0 || s.MaxLength >= 0
		s.Extensions["wasmhist-step"] = step{r: r, perByte: perByte, own: ownSteps(s), quotesNames: s.AdditionalProperties == false, patterns: len(s.PatternProperties)}
		return true
	})
}

// newGuarded counts the validations of a compiled copy of a schema of
// cost n on a run of its own.
func newGuarded(root *jsonschema.Schema, n int) *guarded {
	c := &guarded{root: root, r: &run{cost: n}}
	guardSteps(root, c.r)
	nest(root, c.r)
	return c
}

// get checks a copy out: the primary when it is free.
func (g *guard) get() (*guarded, error) {
	g.mu.Lock()
	if !g.primaryBusy {
		g.primaryBusy = true
		g.mu.Unlock()
		return g.primary, nil
	}
	if n := len(g.free); n > 0 {
		c := g.free[n-1]
		g.free = g.free[:n-1]
		g.mu.Unlock()
		return c, nil
	}
	g.mu.Unlock()
	root, err := compileRoot(g.raw, g.name)
	if err != nil {
		return nil, err
	}
	return newGuarded(root, g.cost), nil
}

func (g *guard) put(c *guarded) {
	c.r.doc, c.r.ctx, c.r.last = nil, nil, nil
	g.mu.Lock()
	defer g.mu.Unlock()
	if c == g.primary {
		g.primaryBusy = false
	} else if len(g.free) < maxFreeCopies {
		g.free = append(g.free, c)
	}
}

// check validates v (at the JSON Pointer at) against the schema, or
// against the schemas of l, counted for a plugin's schema. A panic of the
// validator on the document (a document it was not made for) is an
// invalid document, not a crash of the host.
func (s *Schema) check(ctx context.Context, v any, at string, l *Local) (err error) {
	var c *guarded
	defer func() {
		if r := recover(); r != nil {
			st, ok := r.(stopped)
			switch {
			case !ok:
				err = &ValidationError{Schema: s.name, Problems: []Problem{{InstanceLocation: at, Message: fmt.Sprintf("the validator failed on the document (%v): change the document", r)}}}
			case st.kind == stopContext:
				err = fmt.Errorf("schema %s: validation stopped after %d steps: %w", s.name, c.r.steps, st.err)
			default:
				err = c.r.stoppedError(s.name, at, st.kind)
			}
		}
		if c != nil {
			s.g.put(c) // after the error read its steps
		}
	}()
	if s.g == nil {
		if l == nil {
			return convert(s.name, s.s.Validate(v), at)
		}
		return l.validateWith(l.schemas, v, at)
	}
	got, err := s.g.get()
	if err != nil {
		return err
	}
	c = got
	c.r.start(ctx, v)
	if l == nil {
		return convert(s.name, c.root.Validate(v), at)
	}
	// The edited value nests as deep as the whole document puts it.
	c.r.depth = l.depth
	subs := l.schemas
	if c != s.g.primary {
		// The Local's schemas are the primary's, whose steps count its run.
		lc, ok := (&Schema{name: s.name, s: c.root, local: s.local}).Local(l.edit)
		if !ok {
			return fmt.Errorf("schema %s: a copy declined an edit its primary checks locally", s.name)
		}
		subs = lc.schemas
	}
	return l.validateWith(subs, v, at)
}

// stoppedError says why r stopped a validation of the document at at.
func (r *run) stoppedError(name, at string, kind stopKind) error {
	e := &ValidationError{Schema: name, cause: ErrTooCostly}
	switch kind {
	case stopDeep:
		e.Problems = []Problem{{InstanceLocation: at + r.deepAt, Message: fmt.Sprintf(
			"validation stopped %d subschemas deep (a member, an element, a reference or a branch each), as deep as the host follows this schema: nest the document or the schema less deeply",
			r.maxDepth)}}
	case stopHeld, stopWork:
		if ve, ok := convert(name, r.last, at).(*ValidationError); ok && len(ve.Problems) > 0 {
			e.Problems = ve.Problems[:1]
		}
		why := fmt.Sprintf("whose errors would hold more than %d MiB", maxFailureBytes>>20)
		if kind == stopWork {
			why = fmt.Sprintf("whose locations, up to %d subschemas deep, would copy more than %d MiB", r.maxDepth, maxFailureWork>>20)
		}
		e.Problems = append(e.Problems, Problem{InstanceLocation: at, Message: fmt.Sprintf(
			"validation stopped after %d failures, %s: the document, or a branch of the schema it tries, fails in too many places, such as the one before",
			r.failures, why)})
	default:
		e.Problems = []Problem{{InstanceLocation: at, Message: fmt.Sprintf(
			"validation stopped after %d steps, twice what a schema of its size takes for this document: the schema evaluates its subschemas for the same values along more paths than it has (such as a recursion naming itself twice at each level)",
			r.steps)}}
	}
	return e
}
