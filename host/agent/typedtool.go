package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/invopop/jsonschema"
)

// NewTool returns a Tool whose arguments are a T, a struct type: its JSON
// Schema is derived from T, and fn gets the arguments decoded into a T
// after the agent has checked them against that schema. The schema follows
// encoding/json: `json` tags name the properties, a field is required
// unless its tag says omitempty, no other property is allowed, and a
// `jsonschema:"description=..."` tag (or enum=, minimum=, ... as
// github.com/invopop/jsonschema reads them) describes a field to the model.
//
// A hand-written schema is still a Tool literal with Parameters and a Func
// over raw JSON. Set SafeToRepeat on the result where it applies.
//
// NewTool panics if T is not a struct or a pointer to one: the type is
// fixed at compile time, so this is a programming error, found on the
// first call, as regexp.MustCompile's is.
func NewTool[T any](name, description string, fn func(ctx context.Context, args T) (any, error)) Tool {
	t := reflect.TypeFor[T]()
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		panic(fmt.Sprintf("agent: NewTool %q: argument type %s is not a struct; a tool's arguments are a JSON object", name, reflect.TypeFor[T]()))
	}
	r := jsonschema.Reflector{
		// One self-contained object schema, as model services want it:
		// no $defs, no $schema, no $id.
		DoNotReference: true,
		ExpandedStruct: true,
		Anonymous:      true,
	}
	sc := r.ReflectFromType(t)
	sc.Version = ""
	params, err := json.Marshal(sc)
	if err != nil {
		panic(fmt.Sprintf("agent: NewTool %q: encoding the schema of %s: %v", name, t, err))
	}
	return Tool{
		Name:        name,
		Description: description,
		Parameters:  params,
		Func: func(ctx context.Context, raw json.RawMessage) (any, error) {
			var args T // a nil *S is allocated by Unmarshal
			if err := json.Unmarshal(raw, &args); err != nil {
				return nil, fmt.Errorf("arguments of %s: %w", name, err)
			}
			return fn(ctx, args)
		},
	}
}
