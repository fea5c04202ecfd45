package offline

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// patterns lists every expression of the model, by name.
var patterns = map[string]pattern{
	"reTime": reTime, "reExpr": reExpr, "reLikesQ": reLikesQ, "reNameQ": reNameQ,
	"reFavQ": reFavQ, "reMemoQ": reMemoQ, "reSummaryQ": reSummaryQ, "reSummarise": reSummarise,
	"reGreeting": reGreeting, "reThanks": reThanks, "reLike": reLike, "reName": reName,
	"reFavourite": reFavourite, "reMemo": reMemo, "reFiller": reFiller, "clauseSep": clauseSep,
}

// phrases are strings some expression matches (or nearly does).
var phrases = []string{
	"what's the time", "What time is it now?", "is it the current time", "TODAY'S DATE please",
	"what day is today", "2+2", "(3 + 4) * 5", "12 x 3", "what food do I like", "which kind of music do i love",
	"what is my name", "who am I", "do you know my name", "what's my favourite colour",
	"what did I ask you to remember", "what do you know about me", "what have I told you",
	"summarise the conversation so far", "Summarize this conversation above", "hi", "Hello there",
	"good morning", "thanks a lot", "thank you", "cheers", "I really like Italian food",
	"i also prefer tea", "my name is Ada", "call me Kim", "my name's Bob", "my favorite book is Dune",
	"please remember the meeting", "remember that I park on level 3", "hey, ok so I like jazz",
	"I like jazz and I love tea", "one. two! three? four; five\nsix", "oh, well, and but also okay",
}

// fold varies a phrase's case letter by letter, and writes s as ſ and k as
// the Kelvin sign now and then: the spellings (?i) also matches.
func fold(r *rand.Rand, s string) string {
	var b strings.Builder
	for _, c := range s {
		switch {
		case (c == 's' || c == 'S') && r.IntN(3) == 0:
			b.WriteRune('ſ')
		case (c == 'k' || c == 'K') && r.IntN(3) == 0:
			b.WriteRune('\u212a')
		case r.IntN(2) == 0:
			b.WriteString(strings.ToUpper(string(c)))
		default:
			b.WriteString(strings.ToLower(string(c)))
		}
	}
	return b.String()
}

// TestPatternsMayHoldWhereTheyMatch: an expression's cheap test holds
// wherever the expression matches, so testing first changes no answer of
// the model: every phrase in every spelling (?i) accepts, and random text.
func TestPatternsMayHoldWhereTheyMatch(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const alphabet = "aehiklmnoprstwy dgcb0123456789.,!?;'\n+-*/()ſ\u212aK×"
	runes := []rune(alphabet)
	var inputs []string
	for _, p := range phrases {
		inputs = append(inputs, p, "  "+p, p+".", strings.ToUpper(p))
		for range 40 {
			inputs = append(inputs, fold(r, p))
		}
	}
	for range 4000 {
		n := r.IntN(24)
		var b strings.Builder
		for range n {
			b.WriteRune(runes[r.IntN(len(runes))])
		}
		inputs = append(inputs, b.String())
	}
	for name, p := range patterns {
		t.Run(name, func(t *testing.T) {
			re := p.re()
			matched := 0
			for _, s := range inputs {
				if re.MatchString(s) {
					matched++
					require.True(t, p.may(s), "%s matches %q, which its test refuses", name, s)
				}
			}
			assert.Positive(t, matched, "no input exercises %s", name)
		})
	}
}

// TestPatternsAnswerAsTheExpressions: each method gives what the compiled
// expression gives, refused inputs included.
func TestPatternsAnswerAsTheExpressions(t *testing.T) {
	inputs := append([]string{"", "x", "ſummarise the conversation", "\u212aelvin"}, phrases...)
	for name, p := range patterns {
		re := p.re()
		for _, s := range inputs {
			assert.Equal(t, re.MatchString(s), p.MatchString(s), "%s MatchString(%q)", name, s)
			assert.Equal(t, re.FindString(s), p.FindString(s), "%s FindString(%q)", name, s)
			assert.Equal(t, re.FindStringSubmatch(s), p.FindStringSubmatch(s), "%s FindStringSubmatch(%q)", name, s)
			assert.Equal(t, re.FindAllStringIndex(s, -1), p.FindAllStringIndex(s, -1), "%s FindAllStringIndex(%q)", name, s)
			assert.Equal(t, re.ReplaceAllString(s, ""), p.ReplaceAllString(s, ""), "%s ReplaceAllString(%q)", name, s)
		}
	}
}
