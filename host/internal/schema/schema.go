// Package schema compiles and applies JSON Schemas (draft 2020-12 by
// default): the project's own schemas embedded in package schemas, and the
// state and config schemas plugins declare in describe.
//
// It wraps github.com/santhosh-tekuri/jsonschema/v5 so that the rest of the
// host sees one small API and one error shape. Two rules matter for safety:
//
//   - Compiling never touches the network or the file system. A schema may
//     refer to itself and to the embedded project schemas (by their $id under
//     schemas.BaseID); any other reference, and any $schema naming an unknown
//     meta-schema, is refused with ErrBadSchema.
//   - Documents are decoded as json.Decoder.UseNumber decodes them (in one
//     pass where they are plain JSON, see decodeFast), so integers beyond
//     2^53 are checked exactly rather than after rounding to float64.
//
// Every validation failure is a *ValidationError that wraps ErrInvalid and
// says where (the JSON Pointer of the offending value) and what (the failing
// keyword, as an absolute schema location, and the validator's message).
//
// Local checks one edit of a document against the part of the schema that
// governs the edited location, so that appending to a long array does not
// revalidate the whole array; see Local for when that is sound.
package schema

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/wasmhist/wasmhist/schemas"
)

var (
	// ErrInvalid is wrapped by every error that reports a document which
	// does not match its schema (or is not JSON at all).
	ErrInvalid = errors.New("schema: document does not match its schema")
	// ErrBadSchema is wrapped by every error that reports a schema which
	// cannot be compiled: not JSON, not a valid schema, or a reference the
	// host refuses to follow.
	ErrBadSchema = errors.New("schema: invalid schema")
)

// maxProblems bounds how many failures an error lists; the first few say
// enough and a hostile document must not produce a megabyte of message.
const maxProblems = 5

// Problem is one reason a document failed validation.
type Problem struct {
	// InstanceLocation is the JSON Pointer of the offending value ("" is the
	// whole document).
	InstanceLocation string
	// KeywordLocation is the absolute location of the failing keyword, with
	// the project schema prefix (schemas.BaseID) shortened away.
	KeywordLocation string
	// Message is the validator's description of the failure.
	Message string
}

func (p Problem) String() string {
	loc := clip(p.InstanceLocation)
	if loc == "" {
		loc = "(document root)"
	}
	if p.KeywordLocation == "" {
		return fmt.Sprintf("at %s: %s", loc, p.Message)
	}
	return fmt.Sprintf("at %s: %s (keyword %s)", loc, p.Message, clip(p.KeywordLocation))
}

// clipAt is the longest location a message quotes whole.
const clipAt = 160

// clip shortens a long location to its start and end, which say where
// it is, so that a message stays within a line or two.
func clip(loc string) string {
	if len(loc) <= clipAt+24 { // what the marker would take
		return loc
	}
	head, tail := clipAt*2/3, len(loc)-clipAt/4
	for head > 0 && !utf8.RuneStart(loc[head]) {
		head--
	}
	for tail < len(loc) && !utf8.RuneStart(loc[tail]) {
		tail++
	}
	return fmt.Sprintf("%s…(%d bytes)…%s", loc[:head], tail-head, loc[tail:])
}

// ValidationError reports why a document does not match a schema.
type ValidationError struct {
	// Schema names the schema (a project file name or the name given to
	// Compile).
	Schema string
	// Problems lists the failures, most specific first, at most maxProblems.
	Problems []Problem
	// More counts failures left out of Problems.
	More int
	// cause, when set, is a more specific reason than ErrInvalid (which
	// it wraps).
	cause error
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "schema %s: ", e.Schema)
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.String())
	}
	if e.More > 0 {
		fmt.Fprintf(&b, "; and %d more", e.More)
	}
	return b.String()
}

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *ValidationError) Unwrap() error {
	if e.cause != nil {
		return e.cause
	}
	return ErrInvalid
}

// Schema is a compiled schema. It is safe for concurrent use.
type Schema struct {
	name string
	s    *jsonschema.Schema
	// local is false when some keyword anywhere in the schema (dynamic
	// references) makes the meaning of a subschema depend on how it was
	// reached, so Local must always decline.
	local bool
	// g, for a plugin's schema, counts every validation's steps
	// (budget.go).
	g *guard
	// counted is a project schema compiled again as a plugin's is, for
	// the documents plugins make (ValidateUntrusted), once.
	counted     *Schema
	countedOnce sync.Once
}

// Name is the name the schema was compiled under.
func (s *Schema) Name() string { return s.name }

// pluginBase is the base URI of a plugin-declared schema that has no $id of
// its own. It is under our domain so that fragment references resolve
// normally, and nothing is ever fetched from it.
const pluginBase = "https://wasmhist.dev/plugin-schemas/"

func newCompiler() *jsonschema.Compiler {
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	// Plugin authors who write "format" expect it checked; the 2020-12
	// default (annotation only) would silently accept garbage timestamps.
	c.AssertFormat = true
	c.LoadURL = loadProject
	for name, f := range jsonschema.Formats {
		if slices.Contains(shortFormats, name) {
			c.Formats[name] = shortFormat(f)
		}
	}
	// Content keywords are annotations, as 2020-12 makes them by
	// default: under draft-07 the library would decode a string's content
	// and validate it with none of the bounds a document has (a number of
	// a million digits took 3.6 s). compileRoot drops contentSchema.
	for name := range jsonschema.Decoders {
		c.Decoders[name] = func(s string) ([]byte, error) { return nil, nil }
	}
	for name := range jsonschema.MediaTypes {
		c.MediaTypes[name] = func([]byte) error { return nil }
	}
	return c
}

// shortFormats name formats whose values are short (a date, an address),
// of which the library checks some in time quadratic in the length (a
// duration of 400 KB took 21 s), so a longer string is not valid.
var shortFormats = []string{"date-time", "date", "time", "duration", "period", "hostname", "email", "ip-address", "ipv4", "ipv6", "uuid"}

// maxShortFormat is the longest string a short format accepts.
const maxShortFormat = 1 << 10

func shortFormat(f func(any) bool) func(any) bool {
	return func(v any) bool {
		if s, ok := v.(string); ok && len(s) > maxShortFormat {
			return false
		}
		return f(v)
	}
}

// loadProject serves the project schemas by $id, each read from the
// embedded files when a schema first refers to it, and refuses every other
// reference. Reading and compiling only the files a schema uses is what
// keeps a short-lived process from paying for all of them (RATIONALE: "Why
// are the project schemas compiled lazily, one at a time?").
func loadProject(u string) (io.ReadCloser, error) {
	if name, ok := strings.CutPrefix(u, schemas.BaseID); ok && slices.Contains(schemas.Names(), name) {
		b, err := schemas.Read(name)
		if err != nil {
			// The embedded files are checked by the schemas tests.
			panic(fmt.Sprintf("schema: reading embedded %s: %v", name, err))
		}
		return io.NopCloser(bytes.NewReader(b)), nil
	}
	return nil, fmt.Errorf("%w: reference to %s refused: a schema may refer only to itself and to %s*", ErrBadSchema, u, schemas.BaseID)
}

// Compile compiles a schema a plugin declared (a state or config schema).
// name identifies it in errors, e.g. "inmemory state_schema". The schema may
// refer to the project schemas by $id, e.g.
// {"$ref": "https://wasmhist.dev/schemas/v1/message.json"}.
func Compile(raw json.RawMessage, name string) (*Schema, error) {
	root, err := compileRoot(raw, name)
	if err != nil {
		return nil, err
	}
	n := cost(root)
	if n > MaxSchemaCost {
		return nil, fmt.Errorf("%w: %s: validating a document would evaluate more than %d subschemas (a subschema reached along many paths, such as a chain of allOf naming the next level twice): share fewer references", ErrBadSchema, name, MaxSchemaCost)
	}
	s := &Schema{name: name, s: root, local: localSound(root)}
	// A validation's steps count what its keywords read of the schema
	// too (ownSteps), and so does the cost its limit grows with.
	n = costOf(root, ownSteps)
	s.g = &guard{raw: bytes.Clone(raw), name: name, cost: n, primary: newGuarded(root, n)}
	return s, nil
}

// compileRoot compiles a plugin's schema.
func compileRoot(raw json.RawMessage, name string) (*jsonschema.Schema, error) {
	// The schema's own numbers (a multipleOf, a minimum) are parsed as a
	// document's are, at every evaluation; its patterns are compiled.
	v, ok, err := decodeFast(raw)
	if !ok && err == nil {
		if v, err = decodeSlow(raw, name); err == nil {
			err = checkNumbers(v)
		} else {
			v, err = nil, nil // not JSON: the library says so
		}
	}
	if err == nil {
		err = checkRegexes(v)
	}
	if err == nil {
		switch objects, values := countObjects(v); {
		case objects > maxSchemaObjects:
			err = fmt.Errorf("the schema holds %d objects, and the host compiles at most %d (compiling takes time quadratic in them: 10,000 took 3.3 s)", objects, maxSchemaObjects)
		case values > maxSchemaValues:
			err = fmt.Errorf("the schema holds %d values, and the host compiles at most %d", values, maxSchemaValues)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadSchema, name, err)
	}
	c := newCompiler()
	c.Formats["regex"] = isBoundedRegex
	loaded := map[string]bool{}
	c.LoadURL = func(u string) (io.ReadCloser, error) {
		rc, err := loadProject(u)
		if err == nil {
			loaded[u] = true
		}
		return rc, err
	}
	u := pluginBase + url.PathEscape(name) + ".json"
	if err := c.AddResource(u, bytes.NewReader(raw)); err != nil {
		return nil, fmt.Errorf("%w: %s: %s", ErrBadSchema, name, trimLib(err))
	}
	s, err := c.Compile(u)
	if err != nil {
		if errors.Is(err, ErrBadSchema) {
			return nil, fmt.Errorf("schema: compiling %s: %w", name, err)
		}
		return nil, fmt.Errorf("%w: %s: %s", ErrBadSchema, name, trimLib(err))
	}
	err = ownSchemas(s, raw, loaded)
	if err == nil {
		err = checkPieces(s)
	}
	if err == nil {
		walkSchemas(s, func(s *jsonschema.Schema) bool {
			if len(s.Enum) > maxEnum {
				err = fmt.Errorf("an enum of %d values at %s: the host compares a value with at most %d", len(s.Enum), s.Location, maxEnum)
			}
			return err == nil
		})
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrBadSchema, name, err)
	}
	walkSchemas(s, func(s *jsonschema.Schema) bool {
		s.ContentSchema = nil // an annotation (newCompiler)
		return true
	})
	checkPatternsByHand(s)
	boundPatterns(s)
	return s, nil
}

// ownSchemas checks that every schema under root is this compile's own,
// which the host may rewrite (nest, boundPatterns): the plugin's, or a
// project schema read for it (loaded, by resource URL). The library
// resolves a reference to a JSON Schema meta-schema to its own
// process-wide copy, without asking the loader; and a plugin's $id under
// schemas.BaseID would pass its schemas off as the project's, which are
// trusted to be few levels deep (nest). raw is the schema compiled,
// which may be a project schema itself (Schema.forUntrusted).
func ownSchemas(root *jsonschema.Schema, raw []byte, loaded map[string]bool) error {
	var err error
	walkSchemas(root, func(s *jsonschema.Schema) bool {
		res, _, _ := strings.Cut(s.Location, "#")
		switch {
		case strings.HasPrefix(res, "https://json-schema.org/"), strings.HasPrefix(res, "http://json-schema.org/"):
			err = fmt.Errorf("it refers to the meta-schema %s: a plugin's schema may refer only to itself and to %s*", res, schemas.BaseID)
		case strings.HasPrefix(res, schemas.BaseID) && !loaded[res]:
			if b, rerr := schemas.Read(strings.TrimPrefix(res, schemas.BaseID)); rerr == nil && bytes.Equal(b, raw) {
				return true
			}
			err = fmt.Errorf("its $id %s is under %s, which names the host's own schemas: choose another $id", res, schemas.BaseID)
		}
		return err == nil
	})
	return err
}

// maxSchemaObjects bounds the objects of a schema a plugin declares: each
// may be a subschema, and the library compiles in time quadratic in them;
// a schema compiles again for each validation that overlaps another.
const maxSchemaObjects = 2048

// maxSchemaValues bounds the values of a schema a plugin declares, its
// enum and const values with the rest: the library compiles each, and
// compares a value with each enum value (a million took 2.9 s to
// compile).
const maxSchemaValues = 1 << 16

// maxEnum bounds one enum: comparing a number with each value parses it
// again, up to 27 µs for a long one, in one step.
const maxEnum = 4096

// countObjects counts the objects, and all the values, in a decoded JSON
// document.
func countObjects(v any) (objects, values int) {
	_ = eachValue(v, func(v any) error {
		if _, ok := v.(map[string]any); ok {
			objects++
		}
		values++
		return nil
	})
	return objects, values
}

func trimLib(err error) string {
	return strings.ReplaceAll(err.Error(), "jsonschema: ", "")
}

// project holds the project schemas compiled so far, by file name, and the
// one compiler that compiles them, so that schemas referring to each other
// (session.json to message.json) share what is compiled.
var project struct {
	mu       sync.Mutex
	compiler *jsonschema.Compiler
	schemas  map[string]*Schema
}

// Project returns the compiled project schema of the given file name (see
// the name constants in package schemas), or nil if there is none. Each is
// compiled on its first use.
func Project(name string) *Schema {
	project.mu.Lock()
	defer project.mu.Unlock()
	if s, ok := project.schemas[name]; ok {
		return s
	}
	if !slices.Contains(schemas.Names(), name) {
		return nil
	}
	if project.compiler == nil {
		project.compiler = newCompiler()
		project.schemas = make(map[string]*Schema)
	}
	s, err := project.compiler.Compile(schemas.ID(name))
	if err != nil {
		panic(fmt.Sprintf("schema: compiling embedded %s: %v", name, err))
	}
	checkPatternsByHand(s)
	project.schemas[name] = &Schema{name: name, s: s, local: localSound(s)}
	return project.schemas[name]
}

// Decode parses JSON the way validation needs it: numbers as json.Number,
// exactly one value. A syntax error is a *ValidationError wrapping
// ErrInvalid that gives the byte offset; otherwise it decodes what
// encoding/json decodes, to the same value.
func Decode(doc []byte, name string) (any, error) {
	if v, ok, _ := decodeFast(doc); ok {
		return v, nil
	}
	// Not JSON, too deep, or a number past DecodeUntrusted's bounds,
	// which Decode does not keep.
	return decodeSlow(doc, name)
}

// DecodeUntrusted is Decode of a document a plugin made, or that a
// plugin's schema validates: a number longer than 1,000 characters, or
// with an exponent past ±1,000, is refused as well, since the validator
// would spend without bound on it. Stored documents (a session, a portable
// file) are decoded without the bound, which would make what was written
// before unreadable.
func DecodeUntrusted(doc []byte, name string) (any, error) {
	v, ok, err := decodeFast(doc)
	if ok {
		return v, nil
	}
	if err != nil {
		return nil, &ValidationError{Schema: name, Problems: []Problem{{Message: err.Error()}}}
	}
	v, err = decodeSlow(doc, name)
	if err != nil {
		return nil, err
	}
	if err := checkNumbers(v); err != nil {
		return nil, &ValidationError{Schema: name, Problems: []Problem{{Message: err.Error()}}}
	}
	return v, nil
}

// decodeSlow is Decode through encoding/json, for what decodeFast does
// not decode: it says why a document is not JSON.
func decodeSlow(doc []byte, name string) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = fmt.Errorf("data after the JSON value at byte offset %d", dec.InputOffset())
		}
	}
	if err != nil {
		var se *json.SyntaxError
		msg := err.Error()
		if errors.As(err, &se) {
			msg = fmt.Sprintf("%s at byte offset %d", se.Error(), se.Offset)
		} else if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
			msg = "unexpected end of JSON input"
		}
		return nil, &ValidationError{Schema: name, Problems: []Problem{{Message: "not valid JSON: " + msg}}}
	}
	return v, nil
}

// Validate checks a JSON document.
func (s *Schema) Validate(doc json.RawMessage) error {
	return s.ValidateContext(context.Background(), doc)
}

// ValidateContext is Validate stopping when ctx ends, with
// an error wrapping ctx's. A plugin's schema decodes the document with
// DecodeUntrusted.
func (s *Schema) ValidateContext(ctx context.Context, doc json.RawMessage) error {
	v, err := s.decode(doc, s.name)
	if err != nil {
		return err
	}
	return s.check(ctx, v, "", nil)
}

// decode is Decode, or DecodeUntrusted for a plugin's schema.
func (s *Schema) decode(doc []byte, name string) (any, error) {
	if s.g != nil {
		return DecodeUntrusted(doc, name)
	}
	return Decode(doc, name)
}

// ValidateUntrusted is ValidateContext of a document a plugin made,
// decoded with DecodeUntrusted and checked as with a plugin's schema
// (counted and wrapped), whatever the schema.
func (s *Schema) ValidateUntrusted(ctx context.Context, doc json.RawMessage) error {
	v, err := DecodeUntrusted(doc, s.name)
	if err != nil {
		return err
	}
	return s.forUntrusted().check(ctx, v, "", nil)
}

// ValidateCounted is ValidateContext of a document from outside the host
// that is read as written (a file to import, whose numbers are not
// bounded as a plugin's are), checked as with a plugin's schema (counted
// and wrapped), whatever the schema.
func (s *Schema) ValidateCounted(ctx context.Context, doc json.RawMessage) error {
	v, err := Decode(doc, s.name)
	if err != nil {
		return err
	}
	return s.forUntrusted().check(ctx, v, "", nil)
}

// forUntrusted is s counted and wrapped as a plugin's schema is: s itself
// for a plugin's, a copy compiled once for a project schema. The project's
// schemas are the host's, but what a plugin makes can fail them in as many
// places as a plugin's can (a message of a million wrong parts).
func (s *Schema) forUntrusted() *Schema {
	if s.g != nil {
		return s
	}
	s.countedOnce.Do(func() {
		raw, err := schemas.Read(s.name)
		if err == nil {
			s.counted, err = Compile(raw, s.name)
		}
		if err != nil {
			// The embedded files are checked by the schemas tests.
			panic(fmt.Sprintf("schema: compiling embedded %s for untrusted documents: %v", s.name, err))
		}
	})
	return s.counted
}

// ValidateValue checks a value: either JSON decoded into any (maps, slices,
// strings, json.Number or float64, bools, nil), or any Go value, which is
// marshalled to JSON first.
func (s *Schema) ValidateValue(v any) error {
	err := s.validate(v, "")
	var te jsonschema.InvalidJSONTypeError
	if !errors.As(err, &te) {
		return err
	}
	b, merr := json.Marshal(v)
	if merr != nil {
		return &ValidationError{Schema: s.name, Problems: []Problem{{Message: "not representable as JSON: " + merr.Error()}}}
	}
	return s.Validate(b)
}

// validate runs the compiled schema and converts its error; prefix is the
// JSON Pointer of v inside the document it came from.
func (s *Schema) validate(v any, prefix string) error {
	return s.check(context.Background(), v, prefix, nil)
}

func convert(name string, err error, prefix string) error {
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		// InfiniteLoopError or InvalidJSONTypeError: keep it inspectable.
		return fmt.Errorf("schema %s: %w: %w", name, ErrInvalid, err)
	}
	// The leaves keep their locations relative to v: prefix, the same for
	// all, is added to the few kept (a Local's at may be long, and there
	// may be many leaves).
	type leaf struct {
		Problem
		depth int
	}
	var leaves []leaf
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			leaves = append(leaves, leaf{Problem{
				InstanceLocation: e.InstanceLocation,
				KeywordLocation:  strings.TrimPrefix(e.AbsoluteKeywordLocation, schemas.BaseID),
				Message:          e.Message,
			}, strings.Count(e.InstanceLocation, "/")})
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	// The library visits properties in map order; sort so that messages
	// are stable, deepest location first (the most specific complaint).
	sort.SliceStable(leaves, func(i, j int) bool {
		if leaves[i].depth != leaves[j].depth {
			return leaves[i].depth > leaves[j].depth
		}
		if leaves[i].InstanceLocation != leaves[j].InstanceLocation {
			return leaves[i].InstanceLocation < leaves[j].InstanceLocation
		}
		return leaves[i].KeywordLocation < leaves[j].KeywordLocation
	})
	out := &ValidationError{Schema: name}
	for i, l := range leaves {
		if i == maxProblems {
			out.More = len(leaves) - maxProblems
			break
		}
		l.InstanceLocation = prefix + l.InstanceLocation
		out.Problems = append(out.Problems, l.Problem)
	}
	return out
}
