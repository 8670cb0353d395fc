package contextfit

import (
	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"

	"strconv"
)

// bytesPerToken is the estimate's rate: the providers' tokenizers cut
// English text and JSON into about four bytes a token. No tokenizer is
// run: each provider has its own, and a budget needs only to be near.
const bytesPerToken = 4

// MediaTokens is the estimate of one piece of media (an image, audio, a
// document, inline or by URI), whatever its size: a large image's tokens
// at Anthropic's rate (width × height / 750, about 1,600 for the largest
// it takes unscaled), above what OpenAI (765 for a high-detail
// 1024 × 1024) and Gemini (258) count for one. Audio and long documents
// cost more, by a length the estimate does not know.
const MediaTokens = 1600

const mediaBytes = MediaTokens * bytesPerToken

// Tokens is the estimate of n bytes of text, rounded up.
func Tokens(n int64) int64 {
	return (n + bytesPerToken - 1) / bytesPerToken
}

// messageBytes is the size of what a message sends, as the estimate
// counts it: text, tool calls' names and arguments, tool results'
// outputs, provider tool calls' names, arguments and outputs, reasoning
// text, and MediaTokens' worth for each piece of media. Ids, signatures
// and roles are left out: they are small, or not billed as text.
func messageBytes(m *agentdv1.Message) int64 {
	var n int64
	for _, p := range m.GetParts() {
		n += partBytes(p)
	}
	return n
}

func partBytes(p *agentdv1.Part) int64 {
	switch k := p.GetKind().(type) {
	case *agentdv1.Part_Text:
		return int64(len(k.Text))
	case *agentdv1.Part_ToolCall:
		return int64(len(k.ToolCall.GetName()) + len(k.ToolCall.GetArguments()))
	case *agentdv1.Part_ToolResult:
		return resultBytes(k.ToolResult.GetOutput(), len(k.ToolResult.GetAttachments()))
	case *agentdv1.Part_ProviderToolCall:
		c := k.ProviderToolCall
		return int64(len(c.GetToolName())+len(c.GetArguments())) + resultBytes(c.GetOutput(), 0)
	case *agentdv1.Part_Media:
		return mediaBytes
	case *agentdv1.Part_Reasoning:
		return int64(len(k.Reasoning.GetText()))
	}
	return 0
}

func resultBytes(output string, attachments int) int64 {
	return int64(len(output)) + int64(attachments)*mediaBytes
}

// appendNote appends the note that stands for a tool output left out:
// its size, and its attachments, which go with it.
func appendNote(b []byte, outputBytes, attachments int) []byte {
	b = append(b, "[tool output left out to fit the context window: "...)
	b = strconv.AppendInt(b, int64(outputBytes), 10)
	b = append(b, " bytes"...)
	if attachments > 0 {
		b = append(b, " and "...)
		b = strconv.AppendInt(b, int64(attachments), 10)
		b = append(b, " attachment"...)
		if attachments > 1 {
			b = append(b, 's')
		}
	}
	return append(b, ']')
}

// noteBytes is the size of the note appendNote writes.
func noteBytes(outputBytes, attachments int) int64 {
	var buf [96]byte
	return int64(len(appendNote(buf[:0], outputBytes, attachments)))
}

// note is the note appendNote writes.
func note(outputBytes, attachments int) string {
	return string(appendNote(nil, outputBytes, attachments))
}
