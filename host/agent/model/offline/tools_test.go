package offline

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var fixedNow = func() time.Time { return time.Date(2024, 1, 2, 12, 34, 56, 0, time.UTC) }

func TestClock(t *testing.T) {
	tests := []struct {
		name    string
		args    string
		want    ClockResult
		wantErr string
	}{
		{name: "utc by default", args: `{}`, want: ClockResult{Time: "12:34", Date: "2024-01-02", Weekday: "Tuesday", Timezone: "UTC", RFC3339: "2024-01-02T12:34:56Z"}},
		{name: "no arguments", args: ``, want: ClockResult{Time: "12:34", Date: "2024-01-02", Weekday: "Tuesday", Timezone: "UTC", RFC3339: "2024-01-02T12:34:56Z"}},
		{name: "unknown zone", args: `{"timezone":"Nowhere/Nothing"}`, wantErr: "unknown time zone"},
		{name: "bad arguments", args: `[1]`, wantErr: "clock: arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Clock(fixedNow).Func(context.Background(), json.RawMessage(tt.args))
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestCalculator(t *testing.T) {
	got, err := Calculator().Func(context.Background(), json.RawMessage(`{"expression":"6*7"}`))
	require.NoError(t, err)
	require.Equal(t, CalculatorResult{Expression: "6*7", Result: "42"}, got)
	_, err = Calculator().Func(context.Background(), json.RawMessage(`{"expression":"1/0"}`))
	require.ErrorIs(t, err, ErrExpression)
}

func TestToolSpecs(t *testing.T) {
	tools := Tools(nil)
	require.Len(t, tools, 2)
	require.Equal(t, ClockTool, tools[0].Name)
	require.Equal(t, CalculatorTool, tools[1].Name)
	for _, tool := range tools {
		spec := tool.Spec()
		var schema map[string]any
		if err := json.Unmarshal(spec.Parameters, &schema); assert.NoError(t, err, "%s: parameters %s", spec.Name, spec.Parameters) {
			assert.Equal(t, "object", schema["type"], "%s: parameters %s are not an object schema", spec.Name, spec.Parameters)
		}
		assert.NotEmpty(t, spec.Description, "%s: description", spec.Name)
		assert.NotNil(t, tool.Func, "%s: func", spec.Name)
	}
	// The default clock is the real one.
	res, err := tools[0].Func(context.Background(), nil)
	require.NoError(t, err)
	got, _ := time.Parse(time.RFC3339, res.(ClockResult).RFC3339)
	require.WithinDuration(t, time.Now(), got, time.Minute, "default clock")
}
