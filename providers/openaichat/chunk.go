package openaichat

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// decodeChunk decodes one chunk of the response stream into c as
// json.Unmarshal does (but that an empty list may come out nil, which
// reads the same), about four times faster for the chunks providers
// send (json.Unmarshal of the chunks was 6% of agentd's CPU).
// The fast decoder accepts only what it can decode to json.Unmarshal's
// result: anything else (an object key in another case or spelled with
// escapes, a key twice, a number that is not a plain integer, a null in a
// list, an "error" member, a string with invalid UTF-8 or a lone
// surrogate, invalid JSON) goes to json.Unmarshal, which decides.
// FuzzDecodeChunk checks the two agree.
func decodeChunk(data []byte, c *chunk) error {
	d := chunkDecoder{data: data}
	if d.chunk(c) {
		return nil
	}
	*c = chunk{}
	return json.Unmarshal(data, c)
}

// chunkDecoder reads data from i. Each method returns false where the
// fast decoder gives up.
type chunkDecoder struct {
	data []byte
	i    int
}

// maxSkipDepth bounds the nesting of the values skipped.
const maxSkipDepth = 64

func (d *chunkDecoder) ws() {
	for d.i < len(d.data) {
		switch d.data[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// peek returns the next byte after white space, or 0 at the end.
func (d *chunkDecoder) peek() byte {
	d.ws()
	if d.i < len(d.data) {
		return d.data[d.i]
	}
	return 0
}

// eat consumes b, the next byte after white space.
func (d *chunkDecoder) eat(b byte) bool {
	if d.peek() != b {
		return false
	}
	d.i++
	return true
}

// null consumes a null, if one is next.
func (d *chunkDecoder) null() bool {
	if d.peek() == 'n' && len(d.data)-d.i >= 4 && string(d.data[d.i:d.i+4]) == "null" {
		d.i += 4
		return true
	}
	return false
}

// seq reads a sequence between open and close, its items separated by
// commas, calling item at each.
func (d *chunkDecoder) seq(open, close byte, item func() bool) bool {
	if !d.eat(open) {
		return false
	}
	if d.eat(close) {
		return true
	}
	for {
		if !item() {
			return false
		}
		switch d.peek() {
		case ',':
			d.i++
		case close:
			d.i++
			return true
		default:
			return false
		}
	}
}

// object reads an object, calling member for each key (with d at its
// value) with the key's raw bytes. Keys with escapes or bytes outside
// ASCII are refused: json.Unmarshal matches keys to a struct's fields
// without regard to case, by Unicode's folding.
func (d *chunkDecoder) object(member func(key []byte) bool) bool {
	return d.seq('{', '}', func() bool {
		key, ok := d.key()
		return ok && d.eat(':') && member(key)
	})
}

// key reads an object's key, refusing escapes and bytes outside ASCII.
func (d *chunkDecoder) key() ([]byte, bool) {
	if d.peek() != '"' {
		return nil, false
	}
	d.i++
	start := d.i
	for d.i < len(d.data) && d.data[d.i] != '"' {
		if b := d.data[d.i]; b == '\\' || b < 0x20 || b >= 0x80 {
			return nil, false
		}
		d.i++
	}
	if d.i == len(d.data) {
		return nil, false
	}
	d.i++
	return d.data[start : d.i-1], true
}

// list reads an array into *s, or a null (which sets *s to nil), each
// element with elem; a null element is refused.
func list[T any](d *chunkDecoder, s *[]T, elem func(*T) bool) bool {
	if d.null() {
		*s = nil
		return true
	}
	*s = (*s)[:0]
	return d.seq('[', ']', func() bool {
		if d.peek() == 'n' {
			return false
		}
		*s = append(*s, *new(T))
		return elem(&(*s)[len(*s)-1])
	})
}

// ptr reads a value into a new *p with read, or a null (which sets *p to
// nil).
func ptr[T any](d *chunkDecoder, p **T, read func(*T) bool) bool {
	if d.null() {
		*p = nil
		return true
	}
	*p = new(T)
	return read(*p)
}

// str reads a string.
func (d *chunkDecoder) str() (string, bool) {
	if !d.eat('"') {
		return "", false
	}
	start := d.i
	ascii := true
	for d.i < len(d.data) {
		switch b := d.data[d.i]; {
		case b == '"':
			s := d.data[start:d.i]
			d.i++
			if !ascii && !utf8.Valid(s) {
				return "", false
			}
			return string(s), true
		case b == '\\':
			return d.escaped(start)
		case b < 0x20:
			return "", false
		case b >= 0x80:
			ascii = false
		}
		d.i++
	}
	return "", false
}

// escaped finishes a string that began at start and has an escape at i.
func (d *chunkDecoder) escaped(start int) (string, bool) {
	buf := make([]byte, 0, d.i-start+16)
	buf = append(buf, d.data[start:d.i]...)
	for d.i < len(d.data) {
		switch b := d.data[d.i]; {
		case b == '"':
			d.i++
			if !utf8.Valid(buf) {
				return "", false
			}
			return string(buf), true
		case b < 0x20:
			return "", false
		case b == '\\':
			var ok bool
			if buf, ok = d.escape(buf); !ok {
				return "", false
			}
		default:
			buf = append(buf, b)
			d.i++
		}
	}
	return "", false
}

// unescaped maps the byte after a backslash to the byte it stands for, 0
// for those that stand for none ('u' begins a code point, read by escape).
var unescaped = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// escape appends to buf what the escape at i stands for.
func (d *chunkDecoder) escape(buf []byte) ([]byte, bool) {
	if d.i+1 >= len(d.data) {
		return buf, false
	}
	d.i += 2
	e := d.data[d.i-1]
	if c := unescaped[e]; c != 0 {
		return append(buf, c), true
	}
	if e != 'u' {
		return buf, false
	}
	r, ok := d.codePoint()
	return utf8.AppendRune(buf, r), ok
}

// codePoint reads the four hex digits of a \u escape, and a second escape
// after it when the first is half of a surrogate pair.
func (d *chunkDecoder) codePoint() (rune, bool) {
	r, ok := d.hex4()
	if !ok || !utf16.IsSurrogate(r) {
		return r, ok
	}
	// Only a pair: json.Unmarshal makes a lone surrogate U+FFFD.
	if d.i+1 >= len(d.data) || d.data[d.i] != '\\' || d.data[d.i+1] != 'u' {
		return 0, false
	}
	d.i += 2
	r2, ok := d.hex4()
	if !ok {
		return 0, false
	}
	r = utf16.DecodeRune(r, r2)
	return r, r != utf8.RuneError
}

func (d *chunkDecoder) hex4() (rune, bool) {
	if len(d.data)-d.i < 4 {
		return 0, false
	}
	var r rune
	for _, b := range d.data[d.i : d.i+4] {
		v, ok := hexDigit(b)
		if !ok {
			return 0, false
		}
		r = r<<4 | v
	}
	d.i += 4
	return r, true
}

func hexDigit(b byte) (rune, bool) {
	v := strings.IndexByte("0123456789abcdef", asciiLower(b))
	return rune(v), v >= 0
}

// optStr reads a string or a null (which leaves *s as it is).
func (d *chunkDecoder) optStr(s *string) bool {
	if d.null() {
		return true
	}
	v, ok := d.str()
	*s = v
	return ok
}

// ptrStr reads a string, or a null (which sets *p to nil).
func (d *chunkDecoder) ptrStr(p **string) bool {
	if d.null() {
		*p = nil
		return true
	}
	v, ok := d.str()
	*p = &v
	return ok
}

// integer reads an integer of at most 18 digits, or a null (which leaves
// *n as it is); fractions and exponents are refused.
func (d *chunkDecoder) integer(n *int64) bool {
	if d.null() {
		return true
	}
	d.ws()
	start := d.i
	if count := d.whole(); count == 0 || count > 18 {
		return false
	}
	if d.next('.') || d.next('e') || d.next('E') {
		return false
	}
	v, err := strconv.ParseInt(string(d.data[start:d.i]), 10, 64)
	*n = v
	return err == nil
}

func (d *chunkDecoder) intField(n *int) bool {
	v := int64(*n)
	if !d.integer(&v) {
		return false
	}
	*n = int(v)
	return true
}

// skip reads any JSON value, checking it.
func (d *chunkDecoder) skip(depth int) bool {
	if depth > maxSkipDepth {
		return false
	}
	switch d.peek() {
	case '{':
		return d.seq('{', '}', func() bool {
			if d.peek() != '"' {
				return false
			}
			_, ok := d.str()
			return ok && d.eat(':') && d.skip(depth+1)
		})
	case '[':
		return d.seq('[', ']', func() bool { return d.skip(depth + 1) })
	case '"':
		_, ok := d.str()
		return ok
	case 't', 'f', 'n':
		return d.literal(literals[d.data[d.i]])
	default:
		return d.number()
	}
}

// literals are the literal values, by their first byte.
var literals = [256]string{'t': "true", 'f': "false", 'n': "null"}

func (d *chunkDecoder) literal(s string) bool {
	if len(d.data)-d.i >= len(s) && string(d.data[d.i:d.i+len(s)]) == s {
		d.i += len(s)
		return true
	}
	return false
}

// number reads a JSON number.
func (d *chunkDecoder) number() bool {
	d.ws()
	if d.whole() == 0 {
		return false
	}
	if d.next('.') && !d.digits() {
		return false
	}
	if d.next('e') || d.next('E') {
		if !d.next('+') {
			d.next('-')
		}
		return d.digits()
	}
	return true
}

// next consumes b if it is the next byte.
func (d *chunkDecoder) next(b byte) bool {
	if d.i < len(d.data) && d.data[d.i] == b {
		d.i++
		return true
	}
	return false
}

// whole reads a number's sign and the digits of its integer part, and
// returns how many digits there were: 0 when there are none, or when a
// zero leads others, which JSON refuses.
func (d *chunkDecoder) whole() int {
	d.next('-')
	start := d.i
	if !d.digits() || d.i-start > 1 && d.data[start] == '0' {
		return 0
	}
	return d.i - start
}

func (d *chunkDecoder) digits() bool {
	start := d.i
	for d.i < len(d.data) && '0' <= d.data[d.i] && d.data[d.i] <= '9' {
		d.i++
	}
	return d.i > start
}

// members reads an object with the keys names, calling set with each one's
// index (d at its value), and skips the values of other keys. A key that
// comes twice, or that json.Unmarshal would match to one of names in
// another case, is refused.
func (d *chunkDecoder) members(names []string, set func(i int) bool) bool {
	var seen uint32
	return d.object(func(key []byte) bool {
		for i, n := range names {
			if string(key) == n {
				if seen&(1<<i) != 0 {
					return false
				}
				seen |= 1 << i
				return set(i)
			}
		}
		for _, n := range names {
			if asciiEqualFold(key, n) {
				return false
			}
		}
		return d.skip(0)
	})
}

func asciiEqualFold(key []byte, name string) bool {
	if len(key) != len(name) {
		return false
	}
	for i := range len(key) {
		if asciiLower(key[i]) != asciiLower(name[i]) {
			return false
		}
	}
	return true
}

func asciiLower(b byte) byte {
	if 'A' <= b && b <= 'Z' {
		return b + 'a' - 'A'
	}
	return b
}

var (
	chunkFields    = []string{"id", "model", "choices", "usage", "error"}
	choiceFields   = []string{"index", "delta", "finish_reason"}
	deltaFields    = []string{"content", "reasoning_content", "reasoning", "refusal", "tool_calls"}
	callFields     = []string{"index", "id", "function"}
	functionFields = []string{"name", "arguments"}
	usageFields    = []string{"prompt_tokens", "completion_tokens", "prompt_tokens_details", "prompt_cache_hit_tokens"}
	detailsFields  = []string{"cached_tokens"}
)

// chunk reads the whole of data as a chunk.
func (d *chunkDecoder) chunk(c *chunk) bool {
	ok := d.members(chunkFields, func(i int) bool {
		switch i {
		case 0:
			return d.optStr(&c.ID)
		case 1:
			return d.optStr(&c.Model)
		case 2:
			return list(d, &c.Choices, d.choice)
		case 3:
			return ptr(d, &c.Usage, d.usage)
		default: // an error: json.Unmarshal keeps its raw bytes
			return false
		}
	})
	d.ws()
	return ok && d.i == len(d.data)
}

func (d *chunkDecoder) choice(ch *chunkChoice) bool {
	return d.members(choiceFields, func(i int) bool {
		switch i {
		case 0:
			return d.intField(&ch.Index)
		case 1:
			if d.null() {
				return true
			}
			return d.delta(&ch.Delta)
		default:
			return d.ptrStr(&ch.FinishReason)
		}
	})
}

func (d *chunkDecoder) delta(delta *chunkDelta) bool {
	return d.members(deltaFields, func(i int) bool {
		switch i {
		case 0:
			return d.ptrStr(&delta.Content)
		case 1:
			return d.ptrStr(&delta.ReasoningContent)
		case 2:
			return d.ptrStr(&delta.Reasoning)
		case 3:
			return d.ptrStr(&delta.Refusal)
		default:
			return list(d, &delta.ToolCalls, d.toolCall)
		}
	})
}

func (d *chunkDecoder) toolCall(tc *chunkToolCall) bool {
	return d.members(callFields, func(i int) bool {
		switch i {
		case 0:
			return d.intField(&tc.Index)
		case 1:
			return d.optStr(&tc.ID)
		default:
			if d.null() {
				return true
			}
			return d.members(functionFields, func(i int) bool {
				if i == 0 {
					return d.optStr(&tc.Function.Name)
				}
				return d.optStr(&tc.Function.Arguments)
			})
		}
	})
}

func (d *chunkDecoder) usage(u *chunkUsage) bool {
	return d.members(usageFields, func(i int) bool {
		switch i {
		case 0:
			return d.integer(&u.PromptTokens)
		case 1:
			return d.integer(&u.CompletionTokens)
		case 2:
			return ptr(d, &u.PromptTokensDetails, d.details)
		default:
			return d.integer(&u.PromptCacheHitTokens)
		}
	})
}

func (d *chunkDecoder) details(t *chunkTokenDetails) bool {
	return d.members(detailsFields, func(int) bool { return d.integer(&t.CachedTokens) })
}
