package offline

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestEvaluate(t *testing.T) {
	tests := []struct {
		name    string
		expr    string
		want    string
		wantErr string
	}{
		{name: "precedence", expr: "2 + 3 * 4", want: "14"},
		{name: "parentheses", expr: "(2 + 3) * 4", want: "20"},
		{name: "unary minus", expr: "-3 - -2", want: "-1"},
		{name: "division", expr: "7 / 2", want: "3.5"},
		{name: "modulo", expr: "17 % 5", want: "2"},
		{name: "power is right-associative", expr: "2 ^ 3 ^ 2", want: "512"},
		{name: "double star power", expr: "2**10", want: "1024"},
		{name: "times and divide signs", expr: "6 × 7 ÷ 2", want: "21"},
		{name: "x as times", expr: "3 x 4", want: "12"},
		{name: "decimals without float noise", expr: "0.1 + 0.2", want: "0.3"},
		{name: "division by zero", expr: "1 / 0", wantErr: "division by zero"},
		{name: "modulo by zero", expr: "1 % 0", wantErr: "division by zero"},
		{name: "missing paren", expr: "(1 + 2", wantErr: "missing )"},
		{name: "trailing operator", expr: "1 +", wantErr: "unexpected end"},
		{name: "letters", expr: "1 + a", wantErr: "unexpected 'a'"},
		{name: "overflow", expr: "10 ^ 400", wantErr: "not a finite number"},
		{name: "too long", expr: strings.Repeat("1+", 200) + "1", wantErr: "longer than"},
		{name: "too deep", expr: strings.Repeat("(", 40) + "1" + strings.Repeat(")", 40), wantErr: "nested too deeply"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := Evaluate(tt.expr)
			if tt.wantErr != "" {
				require.ErrorIs(t, err, ErrExpression)
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, FormatNumber(v))
		})
	}
}

func FuzzEvaluate(f *testing.F) {
	for _, s := range []string{"2+3*4", "(1+2", "2^3^2", "-(-(1))", "1/0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := Evaluate(s)
		if err == nil {
			require.NotEmpty(t, FormatNumber(v), "%q: empty result", s)
		}
	})
}
