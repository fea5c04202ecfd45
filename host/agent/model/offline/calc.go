package offline

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ErrExpression is returned for an arithmetic expression the calculator
// cannot evaluate.
var ErrExpression = errors.New("offline: invalid expression")

// maxExpression bounds the calculator's input so a hostile argument cannot
// recurse deeply.
const maxExpression = 256

// Evaluate computes an arithmetic expression: numbers, + - * / % ^ (power),
// parentheses and unary minus; x, × and ÷ are accepted for * and /.
func Evaluate(expr string) (float64, error) {
	if len(expr) > maxExpression {
		return 0, fmt.Errorf("%w: longer than %d bytes", ErrExpression, maxExpression)
	}
	p := &parser{s: normalize(expr)}
	v, err := p.sum()
	if err != nil {
		return 0, err
	}
	p.space()
	if p.i < len(p.s) {
		return 0, fmt.Errorf("%w: unexpected %q at %d", ErrExpression, p.s[p.i], p.i)
	}
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, fmt.Errorf("%w: result is not a finite number", ErrExpression)
	}
	return v, nil
}

// FormatNumber prints a result without float noise: integers without a
// fraction, others with at most 10 significant decimals.
func FormatNumber(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	s := strconv.FormatFloat(v, 'f', 10, 64)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

func normalize(s string) string {
	r := strings.NewReplacer("×", "*", "÷", "/", "x", "*", "X", "*", "**", "^")
	return r.Replace(s)
}

type parser struct {
	s     string
	i     int
	depth int
}

func (p *parser) space() {
	for p.i < len(p.s) && p.s[p.i] == ' ' {
		p.i++
	}
}

func (p *parser) peek() byte {
	p.space()
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *parser) sum() (float64, error) {
	v, err := p.product()
	for err == nil {
		switch p.peek() {
		case '+', '-':
			op := p.s[p.i]
			p.i++
			var w float64
			if w, err = p.product(); err == nil {
				if op == '+' {
					v += w
				} else {
					v -= w
				}
			}
		default:
			return v, nil
		}
	}
	return 0, err
}

func (p *parser) product() (float64, error) {
	v, err := p.power()
	for err == nil {
		switch p.peek() {
		case '*', '/', '%':
			op := p.s[p.i]
			p.i++
			var w float64
			if w, err = p.power(); err != nil {
				break
			}
			switch {
			case op == '*':
				v *= w
			case w == 0:
				return 0, fmt.Errorf("%w: division by zero", ErrExpression)
			case op == '/':
				v /= w
			default:
				v = math.Mod(v, w)
			}
		default:
			return v, nil
		}
	}
	return 0, err
}

// power is right-associative: 2^3^2 is 2^9.
func (p *parser) power() (float64, error) {
	base, err := p.unary()
	if err != nil {
		return 0, err
	}
	if p.peek() != '^' {
		return base, nil
	}
	p.i++
	exp, err := p.power()
	if err != nil {
		return 0, err
	}
	return math.Pow(base, exp), nil
}

func (p *parser) unary() (float64, error) {
	switch p.peek() {
	case '-':
		p.i++
		v, err := p.unary()
		return -v, err
	case '+':
		p.i++
		return p.unary()
	}
	return p.atom()
}

func (p *parser) atom() (float64, error) {
	c := p.peek()
	if c == '(' {
		if p.depth++; p.depth > 32 {
			return 0, fmt.Errorf("%w: nested too deeply", ErrExpression)
		}
		p.i++
		v, err := p.sum()
		if err != nil {
			return 0, err
		}
		if p.peek() != ')' {
			return 0, fmt.Errorf("%w: missing )", ErrExpression)
		}
		p.i++
		p.depth--
		return v, nil
	}
	start := p.i
	for p.i < len(p.s) && (p.s[p.i] >= '0' && p.s[p.i] <= '9' || p.s[p.i] == '.') {
		p.i++
	}
	if start == p.i {
		if c == 0 {
			return 0, fmt.Errorf("%w: unexpected end", ErrExpression)
		}
		return 0, fmt.Errorf("%w: unexpected %q at %d", ErrExpression, c, start)
	}
	v, err := strconv.ParseFloat(p.s[start:p.i], 64)
	if err != nil {
		return 0, fmt.Errorf("%w: bad number %q", ErrExpression, p.s[start:p.i])
	}
	return v, nil
}
