package schema

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// Step is one level of the path from the document root to an edited
// container: the member name or element index taken, and whether the
// container at that level is an array.
type Step struct {
	Token string
	Array bool
}

// EditKind says what an edit does at its location.
type EditKind int

// Edit kinds.
const (
	// Insert adds an object member that did not exist, or inserts (or
	// appends) an array element.
	Insert EditKind = iota
	// Replace changes the value of an existing member or element.
	Replace
	// Remove deletes a member or element.
	Remove
)

// Edit describes one change to a document that was valid before it.
type Edit struct {
	// Path leads from the root to the container being edited; its last
	// step's Array says nothing (the container's own kind is ContainerArray).
	Path []Step
	// ContainerArray is true when the edited container is an array.
	ContainerArray bool
	// Key is the member name when the container is an object.
	Key  string
	Kind EditKind
}

// Local is the check one edit needs: the schemas the new value must satisfy.
// The zero Local accepts everything.
type Local struct {
	name    string
	schemas []*jsonschema.Schema
	// s and edit: the schema and the edit it was made for, which a copy
	// of a guarded schema walks again (Schema.check).
	s    *Schema
	edit Edit
	// depth is how deep a validation of the whole document nests above
	// the edited value (Schema.Local), where the check starts.
	depth int
}

// Validate checks the value an edit puts in place. at is the value's JSON
// Pointer in the whole document, used in error messages.
func (l Local) Validate(value json.RawMessage, at string) error {
	if len(l.schemas) == 0 {
		return nil
	}
	v, err := l.s.decode(value, l.name)
	if err != nil {
		if ve, ok := err.(*ValidationError); ok {
			for i := range ve.Problems {
				ve.Problems[i].InstanceLocation = at
			}
		}
		return err
	}
	return l.ValidateDecoded(v, at)
}

// Decodes reports whether Validate decodes the value, and so refuses one
// that is not JSON: the zero Local checks nothing at all.
func (l Local) Decodes() bool { return len(l.schemas) > 0 }

// ValidateDecoded is Validate of a value Decode returned.
func (l Local) ValidateDecoded(v any, at string) error {
	return l.ValidateDecodedContext(context.Background(), v, at)
}

// ValidateDecodedContext is ValidateDecoded stopping when ctx ends, with
// an error wrapping ctx's.
func (l Local) ValidateDecodedContext(ctx context.Context, v any, at string) error {
	if len(l.schemas) == 0 {
		return nil
	}
	return l.s.check(ctx, v, at, &l)
}

func (l *Local) validateWith(schemas []*jsonschema.Schema, v any, at string) error {
	for _, s := range schemas {
		if err := convert(l.name, s.Validate(v), at); err != nil {
			return err
		}
	}
	return nil
}

// Local returns the check for one edit of a document that is valid against
// s, such that the edited document is valid if and only if the check
// passes. ok is false when no such local check exists and the whole document
// must be validated instead.
//
// The walk follows properties, patternProperties, additionalProperties,
// items and $ref from the root to the edited location. It declines (ok =
// false) wherever a keyword's verdict could depend on more than the edited
// value: on the path or the edited container, enum, const, allOf, anyOf,
// oneOf, not, if, dependent*, unevaluated*, contains, uniqueItems, boolean
// false schemas and extensions; at the container, the count and name
// keywords an edit can break (maxItems, minItems, maxProperties,
// minProperties, propertyNames, required, prefixItems); and everywhere if
// the schema uses $dynamicRef or $recursiveRef.
func (s *Schema) Local(e Edit) (l Local, ok bool) {
	if !s.local {
		return Local{}, false
	}
	// depth counts the wrappers (nest) a validation of the whole
	// document enters above the edited value, along the deepest chain,
	// which the check of the value starts from.
	set, depth, ok := expand([]*jsonschema.Schema{s.s})
	if !ok {
		return Local{}, false
	}
	for _, st := range e.Path {
		if !transparent(set) {
			return Local{}, false
		}
		var d int
		if set, d, ok = child(set, st.Token, st.Array); !ok {
			return Local{}, false
		}
		depth += d
	}
	if !transparent(set) {
		return Local{}, false
	}
	for _, c := range set {
		c := unwrap(c)
		if e.ContainerArray {
			if len(c.PrefixItems) > 0 || c.AdditionalItems != nil {
				return Local{}, false
			}
			if _, tuple := c.Items.([]*jsonschema.Schema); tuple {
				return Local{}, false
			}
			if (e.Kind == Insert && c.MaxItems >= 0) || (e.Kind == Remove && c.MinItems >= 0) {
				return Local{}, false
			}
			continue
		}
		switch e.Kind {
		case Insert:
			if c.MaxProperties >= 0 || c.PropertyNames != nil || len(c.DependentRequired) > 0 {
				return Local{}, false
			}
		case Remove:
			if c.MinProperties >= 0 || len(c.DependentRequired) > 0 || slices.Contains(c.Required, e.Key) {
				return Local{}, false
			}
		}
	}
	if e.Kind == Remove {
		return Local{name: s.name}, true
	}
	vs, _, ok := child(set, e.Key, e.ContainerArray)
	if !ok {
		return Local{}, false
	}
	out := vs[:0:0]
	for _, v := range vs {
		if a := unwrap(v).Always; a != nil && *a {
			continue
		}
		out = append(out, v)
	}
	// Each schema of the set carries its own $ref target too; validating
	// the set members reached through $ref again would be redundant, but
	// expand keeps them all, so drop the ones some other member refers to.
	return Local{name: s.name, schemas: roots(out), s: s, edit: e, depth: depth}, true
}

// expand adds the targets of $ref to a set of schemas that all apply at one
// location (in 2020-12 $ref applies alongside its sibling keywords). It
// declines on dynamic references, whose target depends on the path taken.
//
// A set holds schemas as references reach them: a guarded schema's
// wrappers (nest), so that a Local validates through their bounds; every
// look at a member's keywords unwraps it.
//
// depth is the most wrappers one member and the targets of its $ref
// chain add to a validation's nesting.
func expand(set []*jsonschema.Schema) (out []*jsonschema.Schema, depth int, ok bool) {
	seen := map[*jsonschema.Schema]bool{}
	var add func(w *jsonschema.Schema, d int) bool
	add = func(w *jsonschema.Schema, d int) bool {
		s := unwrap(w)
		if s == nil || seen[s] {
			return true
		}
		seen[s] = true
		if s.DynamicRef != nil || s.RecursiveRef != nil {
			return false
		}
		if s != w {
			d++
		}
		depth = max(depth, d)
		out = append(out, w)
		return add(s.Ref, d)
	}
	for _, s := range set {
		if !add(s, 0) {
			return nil, 0, false
		}
	}
	return out, depth, true
}

// roots removes from set every schema that another member reaches through
// $ref, since validating the referrer already validates the target.
func roots(set []*jsonschema.Schema) []*jsonschema.Schema {
	reached := map[*jsonschema.Schema]bool{}
	for _, s := range set {
		for r := unwrap(unwrap(s).Ref); r != nil && !reached[r]; r = unwrap(r.Ref) {
			reached[r] = true
		}
	}
	out := set[:0:0]
	for _, s := range set {
		if !reached[unwrap(s)] {
			out = append(out, s)
		}
	}
	return out
}

// transparent reports whether a change below a location leaves every
// keyword that applies at the location itself satisfied, given that the
// document was valid before and the location keeps its type.
func transparent(set []*jsonschema.Schema) bool {
	for _, s := range set {
		s := unwrap(s)
		switch {
		case s.Always != nil && !*s.Always,
			len(s.Constant) > 0, len(s.Enum) > 0,
			s.Not != nil, len(s.AllOf) > 0, len(s.AnyOf) > 0, len(s.OneOf) > 0, s.If != nil,
			len(s.Dependencies) > 0, len(s.DependentSchemas) > 0,
			s.UnevaluatedProperties != nil, s.UnevaluatedItems != nil,
			s.Contains != nil, s.UniqueItems,
			!onlyHandPatterns(s):
			return false
		}
	}
	return true
}

// child returns the schemas that apply to the member key of an object, or
// to any element of an array, below a set of schemas.
func child(set []*jsonschema.Schema, key string, array bool) ([]*jsonschema.Schema, int, bool) {
	var next []*jsonschema.Schema
	for _, w := range set {
		s := unwrap(w)
		if array {
			if len(s.PrefixItems) > 0 || s.AdditionalItems != nil {
				return nil, 0, false
			}
			switch it := s.Items.(type) {
			case *jsonschema.Schema:
				next = append(next, it)
			case []*jsonschema.Schema:
				return nil, 0, false
			}
			if s.Items2020 != nil {
				next = append(next, s.Items2020)
			}
			continue
		}
		if len(s.PatternProperties) > 0 && len(key)*keyCostOf(w) > maxPatternWork {
			return nil, 0, false // the whole document's check refuses the name (enter)
		}
		matched := false
		if p, ok := s.Properties[key]; ok {
			next, matched = append(next, p), true
		}
		for re, p := range s.PatternProperties {
			if re.MatchString(key) {
				next, matched = append(next, p), true
			}
		}
		if matched {
			continue
		}
		switch ap := s.AdditionalProperties.(type) {
		case bool:
			if !ap {
				return nil, 0, false
			}
		case *jsonschema.Schema:
			next = append(next, ap)
		}
	}
	return expand(next)
}

// localSound reports whether any schema reachable from root uses a dynamic
// reference; if one does, Local always declines.
func localSound(root *jsonschema.Schema) bool {
	sound := true
	walkSchemas(root, func(s *jsonschema.Schema) bool {
		if s.DynamicRef != nil || s.RecursiveRef != nil {
			sound = false
		}
		return sound
	})
	return sound
}

// walkSchemas calls visit on root and every schema below it, each once,
// until visit returns false.
func walkSchemas(root *jsonschema.Schema, visit func(*jsonschema.Schema) bool) {
	seen := map[*jsonschema.Schema]bool{}
	stop := false
	var walk func(s *jsonschema.Schema)
	walk = func(s *jsonschema.Schema) {
		if s == nil || seen[s] || stop {
			return
		}
		seen[s] = true
		if !visit(s) {
			stop = true
			return
		}
		for _, c := range subschemas(s) {
			walk(c)
		}
	}
	walk(root)
}

// subschemas lists every schema directly below s (nil entries included).
func subschemas(s *jsonschema.Schema) []*jsonschema.Schema {
	out := []*jsonschema.Schema{s.Ref, s.RecursiveRef, s.DynamicRef, s.Not, s.If, s.Then, s.Else, s.PropertyNames,
		s.UnevaluatedProperties, s.Items2020, s.Contains, s.UnevaluatedItems, s.ContentSchema}
	for _, list := range [][]*jsonschema.Schema{s.AllOf, s.AnyOf, s.OneOf, s.PrefixItems} {
		out = append(out, list...)
	}
	for _, c := range s.Properties {
		out = append(out, c)
	}
	for _, c := range s.PatternProperties {
		out = append(out, c)
	}
	for _, c := range s.DependentSchemas {
		out = append(out, c)
	}
	out = append(out, schemasIn(s.AdditionalProperties, s.Items, s.AdditionalItems)...)
	for _, d := range s.Dependencies {
		if c, ok := d.(*jsonschema.Schema); ok {
			out = append(out, c)
		}
	}
	return out
}

// schemasIn lists the schemas the library's untyped fields hold (each
// nil, a bool, a schema or a list of them).
func schemasIn(fields ...any) []*jsonschema.Schema {
	var out []*jsonschema.Schema
	for _, x := range fields {
		switch x := x.(type) {
		case *jsonschema.Schema:
			out = append(out, x)
		case []*jsonschema.Schema:
			out = append(out, x...)
		}
	}
	return out
}

// MaxSchemaCost bounds a plugin schema's cost: how many subschemas one
// validation may evaluate for a document that meets each of them once,
// a schema reached along two paths counting twice (validation evaluates
// it twice), a recursion once. Evaluating a few hundred thousand
// subschemas takes the validator tens of milliseconds; a schema that
// reaches one subschema along 2^60 paths (a chain of allOf, each naming
// the next level twice) would run for ever and take every byte of
// memory, on the host's own goroutine, with no deadline.
const MaxSchemaCost = 200_000

// cost is a schema's cost (MaxSchemaCost), saturating just past the bound.
func cost(root *jsonschema.Schema) int { return costOf(root, nil) }

// costOf is cost with each subschema counting 1 and own(s) more, where
// own is not nil.
func costOf(root *jsonschema.Schema, own func(*jsonschema.Schema) int) int {
	memo := map[*jsonschema.Schema]int{}
	var f func(s *jsonschema.Schema) int
	f = func(s *jsonschema.Schema) int {
		if s == nil {
			return 0
		}
		if n, ok := memo[s]; ok {
			return n // a recursion in progress counts 0 below itself
		}
		memo[s] = 0
		n := 1
		if own != nil {
			n += own(s)
		}
		for _, c := range subschemas(s) {
			if n += f(c); n > MaxSchemaCost {
				n = MaxSchemaCost + 1
				break
			}
		}
		memo[s] = n
		return n
	}
	return f(root)
}
