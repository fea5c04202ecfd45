package offline

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

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
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

func TestCalculator(t *testing.T) {
	got, err := Calculator().Func(context.Background(), json.RawMessage(`{"expression":"6*7"}`))
	if err != nil || got != (CalculatorResult{Expression: "6*7", Result: "42"}) {
		t.Fatalf("got %+v, %v", got, err)
	}
	_, err = Calculator().Func(context.Background(), json.RawMessage(`{"expression":"1/0"}`))
	require.ErrorIs(t, err, ErrExpression)
}

func TestToolSpecs(t *testing.T) {
	tools := Tools(nil)
	if len(tools) != 2 || tools[0].Name != ClockTool || tools[1].Name != CalculatorTool {
		t.Fatalf("tools %+v", tools)
	}
	for _, tool := range tools {
		spec := tool.Spec()
		var schema map[string]any
		if err := json.Unmarshal(spec.Parameters, &schema); err != nil || schema["type"] != "object" {
			t.Errorf("%s: parameters %s are not an object schema (%v)", spec.Name, spec.Parameters, err)
		}
		if spec.Description == "" || tool.Func == nil {
			t.Errorf("%s: incomplete", spec.Name)
		}
	}
	// The default clock is the real one.
	res, err := tools[0].Func(context.Background(), nil)
	require.NoError(t, err)
	got, _ := time.Parse(time.RFC3339, res.(ClockResult).RFC3339)
	if d := time.Since(got); d < -time.Minute || d > time.Minute {
		t.Fatalf("default clock is %v off", d)
	}
}
