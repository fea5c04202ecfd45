// Package offline is the built-in model: deterministic, with no network and
// no key, so the product runs on a fresh machine. It implements
// model.Client, calls tools so the agent's tool loop really runs, and
// answers from the messages of the request alone: it keeps no state between
// calls, so a session that remembers does so only because its history was
// stored and sent again.
//
// The offline model reads the last user message, split into clauses at
// sentence ends and at " and I"/" and my". It understands:
//
//	pattern (case-insensitive)                    reply
//	I like|love|enjoy|adore|prefer X              Noted: you like X. I'll remember that.
//	my name is X / call me X                      Nice to meet you, X.
//	my favourite|favorite T is X                  Noted: your favourite T is X.
//	remember (that) X                             I'll remember that X.
//	what (T) do I like|love|...?                  You told me you like X. (only likes mentioning T)
//	what is my name? / who am I?                  Your name is X.
//	what is my favourite T?                       You told me your favourite T is X.
//	what did I ask you to remember?               You asked me to remember that X.
//	what did I tell you? / what do you know       You told me that A, B and C.
//	  about me?
//	what time is it? / what is the date? ...      calls the clock tool, then: It is 15:04 (UTC) on Monday, 2 January 2006.
//	an arithmetic expression (2 + 3 * 4)          calls the calculator tool, then: 2 + 3 * 4 = 14.
//	summarise the conversation (above)            The user said:\nI like X.\n... (each statement, verbatim)
//	hi / hello                                    a greeting, by name when known
//	anything else                                 Help
//
// Statements are recalled from every user message in the request, with
// first person turned into second ("I like my cat" becomes "you like your
// cat"). The model's own messages are never taken as evidence.
//
// A tool is called only when the request offers it (Request.Tools); without
// the calculator the model does the arithmetic itself, without the clock it
// says it cannot know the time. When the request ends with function results
// for the model's last calls, it answers from those results. Several tools
// may be called in one turn ("what time is it, and what is 6*7?").
//
// Output is a pure function of the request: the reply's message id and call
// ids are derived from a hash of the messages. The clock tool takes its time
// from an injectable source (Clock, Tools), so a whole conversation is
// reproducible.
package offline
