package portable

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"

	"github.com/openai/openai-go/v3"

	"github.com/wasmhist/wasmhist/abi"
	oa "github.com/wasmhist/wasmhist/host/agent/model/openai"
)

// WriteOpenAI writes a history as one OpenAI Chat Completions messages
// array, one message at a time: exactly what the Chat client sends for it
// (oa.ChatMessages), so a Chat Completions server accepts it wherever it
// accepts the client's requests. What the array cannot carry is left out,
// as the client leaves it out: reasoning and usage parts, message ids,
// authors, timestamps and sources. Media parts are refused with
// ErrConvert (the client cannot send them either), naming the message.
func WriteOpenAI(w io.Writer, history iter.Seq2[abi.Message, error]) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	fail := func(i int, err error) error {
		return &Error{SlotIndex: -1, Message: i, Offset: -1, Err: err}
	}
	if _, err := bw.WriteString("["); err != nil {
		return fail(-1, fmt.Errorf("portable: writing: %w", err))
	}
	first, i := true, -1
	for m, err := range history {
		i++
		if err != nil {
			return err
		}
		chat, err := oa.ChatMessages([]abi.Message{m})
		if err != nil {
			return fail(i, fmt.Errorf("%w: %w", ErrConvert, err))
		}
		for _, c := range chat {
			b, err := json.Marshal(c)
			if err != nil {
				return fail(i, fmt.Errorf("%w: %w", ErrConvert, err))
			}
			if !first {
				bw.WriteString(",")
			}
			first = false
			bw.WriteString("\n")
			if _, err := bw.Write(b); err != nil {
				return fail(i, fmt.Errorf("portable: writing: %w", err))
			}
		}
	}
	bw.WriteString("\n]\n")
	if err := bw.Flush(); err != nil {
		return fail(-1, fmt.Errorf("portable: writing: %w", err))
	}
	return nil
}

// chatRoles are the roles oa.FromChatMessage maps; function is refused
// there, with its reason.
var chatRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true, "function": true}

// ReadOpenAI reads an OpenAI Chat Completions messages array from src
// and yields it as abi messages, one at a time (oa.FromChatMessage says
// how each maps), each checked against schemas/message.json. A message
// that has no abi equivalent (media, a refusal, a custom tool call) is
// refused with ErrConvert, never dropped; errors name the message's index
// in the array. lim.MaxMessageBytes bounds one message.
func ReadOpenAI(src io.Reader, lim Limits) iter.Seq2[abi.Message, error] {
	return ReadOpenAIContext(context.Background(), src, lim)
}

// ReadOpenAIContext is ReadOpenAI with ctx bounding its checks, as
// NewReaderContext's.
func ReadOpenAIContext(ctx context.Context, src io.Reader, lim Limits) iter.Seq2[abi.Message, error] {
	return func(yield func(abi.Message, error) bool) {
		r := newReader(ctx, src, lim)
		if err := r.delim('[', "the document"); err != nil {
			yield(abi.Message{}, r.fail(err))
			return
		}
		for {
			r.arm(r.lim.MaxMessageBytes)
			if !r.dec.More() {
				break
			}
			r.msgIdx++
			m, err := r.openAIMessage()
			if err != nil {
				yield(abi.Message{}, r.fail(err))
				return
			}
			if !yield(m, nil) {
				return
			}
		}
		r.msgIdx = -1
		if err := r.delim(']', "the document"); err != nil {
			yield(abi.Message{}, r.fail(err))
			return
		}
		if _, err := r.token(); err != io.EOF {
			if err == nil {
				err = fmt.Errorf("%w: data after the messages array", ErrMalformed)
			}
			yield(abi.Message{}, r.fail(err))
		}
	}
}

func (r *Reader) openAIMessage() (abi.Message, error) {
	raw, err := r.value(r.lim.MaxMessageBytes)
	if err != nil {
		return abi.Message{}, err
	}
	var head struct {
		Role *string `json:"role"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return abi.Message{}, fmt.Errorf("%w: not a message object: %w", ErrMalformed, err)
	}
	if head.Role == nil || !chatRoles[*head.Role] {
		role := "none"
		if head.Role != nil {
			role = fmt.Sprintf("%q", *head.Role)
		}
		return abi.Message{}, fmt.Errorf("%w: role %s is not system, developer, user, assistant or tool", ErrMalformed, role)
	}
	var c openai.ChatCompletionMessageParamUnion
	if err := json.Unmarshal(raw, &c); err != nil {
		return abi.Message{}, fmt.Errorf("%w: %s message: %w", ErrMalformed, *head.Role, err)
	}
	m, err := oa.FromChatMessage(c)
	if err != nil {
		return abi.Message{}, fmt.Errorf("%w: %w", ErrConvert, err)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return abi.Message{}, fmt.Errorf("%w: %w", ErrInvalidMessage, err)
	}
	if err := r.validate(messageSchema(), b, func(err error) error {
		return fmt.Errorf("%w: %w", ErrInvalidMessage, err)
	}); err != nil {
		return abi.Message{}, err
	}
	return m, nil
}
