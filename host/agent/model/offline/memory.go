package offline

import (
	"strings"

	"github.com/wasmhist/wasmhist/abi"
)

// factKind says what a user told the model.
type factKind int

const (
	factLike factKind = iota
	factName
	factFavourite
	factMemo
)

// fact is one thing a user told the model, already rephrased from the
// model's side ("you like your cat").
type fact struct {
	kind   factKind
	verb   string // like, love, enjoy, prefer (factLike)
	thing  string // the favourite's subject (factFavourite)
	object string
}

var (
	reLike      = lazy(`(?i)^i (?:really |also |do |still )?(like|love|enjoy|adore|prefer) (.+)$`, startsFold("i"))
	reName      = lazy(`(?i)^(?:my name is|my name's|call me) ([\p{L}][\p{L}'\- ]*)$`, startsFold("mc"))
	reFavourite = lazy(`(?i)^my favou?rite ([\p{L} ]+?) is (.+)$`, startsFold("m"))
	reMemo      = lazy(`(?i)^(?:please )?remember ((?:that )?.+)$`, startsFold("pr"))
	// reFiller is spoken filler before a statement ("Hi, my name is Ada").
	reFiller = lazy(`(?i)^(?:(?:hi|hello|hey|well|ok|okay|so|also|and|but|oh)\b[,!]?\s*)+`, startsFold("hwosab"))
	// clauseSep splits a message into clauses: at sentence ends (a dot
	// inside a number is not one), and where " and I"/" and my" starts a
	// new statement ("I like jazz and I love tea").
	clauseSep = lazy(`[.!?;]+(?:\s+|$)|\n+|,? and (?i:(?:i|my) )`, func(s string) bool {
		return strings.ContainsAny(s, ".!?;\n") || strings.Contains(s, " and ")
	})
)

// clauses splits text into trimmed clauses. A separator that swallowed the
// clause's first word ("and I ...") gives it back.
func clauses(text string) []string {
	var out []string
	last := 0
	add := func(s string) {
		s = strings.Trim(s, " \t,\"'")
		if s != "" {
			out = append(out, s)
		}
	}
	for _, loc := range clauseSep.FindAllStringIndex(text, -1) {
		add(text[last:loc[0]])
		sep := text[loc[0]:loc[1]]
		last = loc[1]
		if i := strings.LastIndex(strings.ToLower(sep), "and "); i >= 0 {
			last = loc[0] + i + len("and ")
		}
	}
	add(text[last:])
	return out
}

// parseFact reads one clause as a statement, if it is one.
func parseFact(clause string) (fact, bool) {
	clause = reFiller.ReplaceAllString(clause, "")
	if m := reFavourite.FindStringSubmatch(clause); m != nil {
		return fact{kind: factFavourite, thing: strings.ToLower(m[1]), object: reflect(m[2])}, true
	}
	if m := reName.FindStringSubmatch(clause); m != nil {
		return fact{kind: factName, object: strings.TrimSpace(m[1])}, true
	}
	if m := reMemo.FindStringSubmatch(clause); m != nil {
		return fact{kind: factMemo, object: reflect(m[1])}, true
	}
	if m := reLike.FindStringSubmatch(clause); m != nil {
		return fact{kind: factLike, verb: strings.ToLower(m[1]), object: reflect(m[2])}, true
	}
	return fact{}, false
}

// facts returns what the user told the model in the given messages, in
// order, without repeats. Only user messages count: the model's own words
// are never evidence of what the user said.
func facts(msgs []abi.Message) []fact {
	var out []fact
	seen := map[fact]bool{}
	for _, m := range msgs {
		if m.Role != abi.RoleUser {
			continue
		}
		for _, c := range clauses(m.TextContent()) {
			if f, ok := parseFact(c); ok && !seen[f] {
				seen[f] = true
				out = append(out, f)
			}
		}
	}
	return out
}

// reflections turn the user's first person into the model's second person.
var reflections = map[string]string{
	"i": "you", "me": "you", "my": "your", "mine": "yours", "myself": "yourself",
	"am": "are", "i'm": "you're", "i've": "you've", "i'll": "you'll", "i'd": "you'd",
}

func reflect(s string) string {
	words := strings.Fields(strings.TrimRight(s, " .!?"))
	for i, w := range words {
		if r, ok := reflections[strings.ToLower(w)]; ok {
			words[i] = r
		}
	}
	return strings.Join(words, " ")
}

// describe phrases a fact from the model's side.
func (f fact) describe() string {
	switch f.kind {
	case factLike:
		return "you " + f.verb + " " + f.object
	case factName:
		return "your name is " + f.object
	case factFavourite:
		return "your favourite " + f.thing + " is " + f.object
	default:
		return "you asked me to remember " + f.object
	}
}

// joinAnd joins phrases as English prose: "a", "a and b", "a, b and c".
func joinAnd(parts []string) string {
	switch len(parts) {
	case 0:
		return ""
	case 1:
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}
