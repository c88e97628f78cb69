package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/threadline/threadline/thread"
)

// Calculator evaluates arithmetic on numbers: + - * / % ^ (or **),
// parentheses, unary minus and plus, decimals (1.5, .5, 2e3). ^ binds
// tighter than unary minus and to the right (-2^2 = -4, 2^3^2 = 512); %
// is the remainder with the sign of the dividend. Its result is the number;
// a malformed expression, a division by zero or a result that is not a
// finite number is an IsError result saying what is wrong and where.
type Calculator struct{}

// MaxExpression is the longest expression the calculator reads, in bytes.
const MaxExpression = 4096

// maxDepth bounds nesting (parentheses, unary signs, powers) so that a
// hostile expression cannot exhaust the stack.
const maxDepth = 256

var calculatorSpec = thread.ToolSpec{
	Name:        "calculator",
	Description: "Evaluates an arithmetic expression on numbers: + - * / % ^, parentheses, unary minus, decimals. Returns the number.",
	Parameters: json.RawMessage(`{"type":"object","properties":{"expression":{"type":"string",` +
		`"description":"the expression, e.g. (12.5 + 3) * 4 ^ 2 / -7"}},"required":["expression"],"additionalProperties":false}`),
}

// Spec implements Tool.
func (Calculator) Spec() thread.ToolSpec { return calculatorSpec }

// Call implements Tool: args is {"expression": "…"}.
func (Calculator) Call(_ context.Context, args json.RawMessage) (thread.ToolOutput, error) {
	var in struct {
		Expression *string `json:"expression"`
	}
	if err := json.Unmarshal(args, &in); err != nil || in.Expression == nil {
		return ErrorResult(`want {"expression": "<arithmetic>"}`), nil
	}
	v, err := Evaluate(*in.Expression)
	if err != nil {
		return ErrorResult(err.Error()), nil
	}
	return thread.ToolOutput{Value: json.RawMessage(FormatNumber(v))}, nil
}

// Evaluate computes an arithmetic expression (see [Calculator]). Its error
// says what is wrong, with the byte offset where it was found.
func Evaluate(expr string) (float64, error) {
	if len(expr) > MaxExpression {
		return 0, fmt.Errorf("the expression is longer than %d bytes", MaxExpression)
	}
	p := &parser{s: expr}
	p.skip()
	if p.pos == len(p.s) {
		return 0, errors.New("the expression is empty")
	}
	v, err := p.expr(0)
	if err != nil {
		return 0, err
	}
	if p.pos < len(p.s) {
		if p.s[p.pos] == ')' {
			return 0, p.errorf("a ')' with no '(' before it")
		}
		return 0, p.errorf("unexpected %q", p.rest())
	}
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, errors.New("the result is not a finite number")
	}
	if v == 0 {
		v = 0 // no "-0"
	}
	return v, nil
}

// FormatNumber writes v as a JSON number rounded to 15 significant digits,
// so that 0.1+0.2 reads 0.3 and 12*7 reads 84.
func FormatNumber(v float64) string {
	r, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 15, 64), 64)
	if err != nil {
		r = v
	}
	if r == 0 {
		return "0"
	}
	if math.Abs(r) < 1e21 && r == math.Trunc(r) {
		return strconv.FormatFloat(r, 'f', -1, 64)
	}
	return strconv.FormatFloat(r, 'g', -1, 64)
}

// parser is a recursive-descent parser that evaluates as it goes:
//
//	expr   = term { ("+" | "-") term }
//	term   = unary { ("*" | "/" | "%") unary }
//	unary  = ("-" | "+") unary | power
//	power  = primary [ ("^" | "**") unary ]
//	primary = number | "(" expr ")"
type parser struct {
	s   string
	pos int
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("at %d: %s", p.pos+1, fmt.Sprintf(format, args...))
}

// rest is the offending text, cut short.
func (p *parser) rest() string {
	r := p.s[p.pos:]
	if len(r) > 10 {
		r = r[:10] + "…"
	}
	return r
}

func (p *parser) skip() {
	for p.pos < len(p.s) && (p.s[p.pos] == ' ' || p.s[p.pos] == '\t' || p.s[p.pos] == '\n' || p.s[p.pos] == '\r') {
		p.pos++
	}
}

// peek returns the next operator, reading "**" as "^".
func (p *parser) peek() (byte, int) {
	if p.pos >= len(p.s) {
		return 0, 0
	}
	if strings.HasPrefix(p.s[p.pos:], "**") {
		return '^', 2
	}
	return p.s[p.pos], 1
}

func (p *parser) expr(depth int) (float64, error) {
	v, err := p.term(depth)
	if err != nil {
		return 0, err
	}
	for {
		op, n := p.peek()
		if op != '+' && op != '-' {
			return v, nil
		}
		p.pos += n
		p.skip()
		w, err := p.term(depth)
		if err != nil {
			return 0, err
		}
		if op == '+' {
			v += w
		} else {
			v -= w
		}
	}
}

func (p *parser) term(depth int) (float64, error) {
	v, err := p.unary(depth)
	if err != nil {
		return 0, err
	}
	for {
		op, n := p.peek()
		if op != '*' && op != '/' && op != '%' {
			return v, nil
		}
		at := p.pos
		p.pos += n
		p.skip()
		w, err := p.unary(depth)
		if err != nil {
			return 0, err
		}
		switch {
		case op == '*':
			v *= w
		case w == 0:
			p.pos = at
			if op == '/' {
				return 0, p.errorf("division by zero")
			}
			return 0, p.errorf("remainder of a division by zero")
		case op == '/':
			v /= w
		default:
			v = math.Mod(v, w)
		}
	}
}

func (p *parser) unary(depth int) (float64, error) {
	if depth > maxDepth {
		return 0, p.errorf("the expression nests deeper than %d", maxDepth)
	}
	op, _ := p.peek()
	if op == '-' || op == '+' {
		p.pos++
		p.skip()
		v, err := p.unary(depth + 1)
		if op == '-' {
			v = -v
		}
		return v, err
	}
	return p.power(depth)
}

func (p *parser) power(depth int) (float64, error) {
	v, err := p.primary(depth)
	if err != nil {
		return 0, err
	}
	if op, n := p.peek(); op == '^' {
		p.pos += n
		p.skip()
		w, err := p.unary(depth + 1)
		if err != nil {
			return 0, err
		}
		v = math.Pow(v, w)
	}
	return v, nil
}

func (p *parser) primary(depth int) (float64, error) {
	if p.pos >= len(p.s) {
		return 0, p.errorf("the expression ends where a number was expected")
	}
	if p.s[p.pos] == '(' {
		p.pos++
		p.skip()
		v, err := p.expr(depth + 1)
		if err != nil {
			return 0, err
		}
		if p.pos >= len(p.s) || p.s[p.pos] != ')' {
			return 0, p.errorf("a '(' is not closed")
		}
		p.pos++
		p.skip()
		return v, nil
	}
	return p.number()
}

// number reads digits with an optional fraction and exponent.
func (p *parser) number() (float64, error) {
	start := p.pos
	digits := p.digits()
	if p.pos < len(p.s) && p.s[p.pos] == '.' {
		p.pos++
		digits += p.digits()
	}
	if digits == 0 {
		p.pos = start
		if p.pos < len(p.s) && p.s[p.pos] == ')' {
			return 0, p.errorf("a ')' where a number was expected")
		}
		return 0, p.errorf("expected a number, got %q", p.rest())
	}
	if p.pos < len(p.s) && (p.s[p.pos] == 'e' || p.s[p.pos] == 'E') {
		save := p.pos
		p.pos++
		if p.pos < len(p.s) && (p.s[p.pos] == '+' || p.s[p.pos] == '-') {
			p.pos++
		}
		if p.digits() == 0 {
			p.pos = save
		}
	}
	v, err := strconv.ParseFloat(p.s[start:p.pos], 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		p.pos = start
		return 0, p.errorf("%q is not a number", p.rest())
	}
	p.skip()
	return v, nil
}

func (p *parser) digits() int {
	n := 0
	for p.pos < len(p.s) && p.s[p.pos] >= '0' && p.s[p.pos] <= '9' {
		p.pos++
		n++
	}
	return n
}
