package openaichat

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// recordedChunks are the data lines of every recorded response stream.
func recordedChunks(t testing.TB) [][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "*", "*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded streams: %v", err)
	}
	var out [][]byte
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), "data: {"); ok {
				out = append(out, []byte("{"+line))
			}
		}
	}
	return out
}

// sameAsUnmarshal fails unless decodeChunk decodes data as json.Unmarshal
// does: both fail, or both give the same chunk (an empty list may be nil).
func sameAsUnmarshal(t *testing.T, data []byte) {
	t.Helper()
	var want, got chunk
	wantErr := json.Unmarshal(data, &want)
	gotErr := decodeChunk(data, &got)
	if (wantErr == nil) != (gotErr == nil) {
		t.Fatalf("decodeChunk(%q): error %v; json.Unmarshal's %v", data, gotErr, wantErr)
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); wantErr == nil && diff != "" {
		t.Fatalf("decodeChunk(%q) (-json.Unmarshal +decodeChunk):\n%s", data, diff)
	}
}

// TestDecodeChunk: every chunk the recorded providers sent is decoded by
// the fast decoder, to json.Unmarshal's result, and so are the edge cases
// below; those it leaves to json.Unmarshal come out as json.Unmarshal's.
func TestDecodeChunk(t *testing.T) {
	t.Parallel()
	recorded := recordedChunks(t)
	for _, data := range recorded {
		sameAsUnmarshal(t, data)
		var c chunk
		if d := (chunkDecoder{data: data}); !d.chunk(&c) && !bytes.Contains(data, []byte(`"error"`)) {
			t.Errorf("the fast decoder gave up on a recorded chunk: %s", data)
		}
	}
	fast := []string{
		`{}`,
		` {"id":"x"} `,
		`{"choices":[],"usage":null,"id":null,"model":"m"}`,
		`{"choices":null}`,
		`{"choices":[{"index":-0,"delta":null,"finish_reason":null}]}`,
		`{"choices":[{"delta":{"content":"a\"b\\c\/d\be\ff\ng\rh\ti\u00e9\u20ac\ud83d\ude00\u0000"}}]}`,
		`{"choices":[{"delta":{"content":"héllo ✓ 😀"}}]}`,
		`{"choices":[{"delta":{"content":null,"reasoning":"r","reasoning_content":"rc","tool_calls":null}}]}`,
		`{"choices":[{"delta":{"content":null,"refusal":"I can't help with that."}},{"delta":{"refusal":null}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"index":2,"id":"c","function":null}]}}]}`,
		`{"choices":[{"delta":{"tool_calls":[{"function":{"name":null,"arguments":"{}"}}]}}]}`,
		`{"usage":{"prompt_tokens":123456789012345678,"completion_tokens":null,"prompt_tokens_details":null}}`,
		`{"usage":{"prompt_tokens_details":{"cached_tokens":7,"audio_tokens":0},"prompt_cache_hit_tokens":3}}`,
		`{"object":"x","created":1.5e10,"logprobs":{"content":[{"token":"a","bytes":[1,2],"top":[]}],"x":[true,false,null,-0.5E-3,"\u00e9"]},"choices":[]}`,
		`{"x":{"\u00e9\"":1,"ünïcode":[{}]}}`,
		`{"unknown":"a","unknown":"b"}`,
	}
	for _, data := range fast {
		sameAsUnmarshal(t, []byte(data))
		var c chunk
		if d := (chunkDecoder{data: []byte(data)}); !d.chunk(&c) {
			t.Errorf("the fast decoder gave up on %s", data)
		}
	}
	// Left to json.Unmarshal: keys it would match in another case, keys
	// twice, what is not a plain integer, nulls in lists, errors, invalid
	// UTF-8, lone surrogates, and what is not JSON.
	for _, data := range []string{
		`{"ID":"x"}`, `{"Choices":[]}`, `{"choices":[{"Delta":{"CONTENT":"a"}}]}`, `{"\u0069d":"x"}`, `{"ſtop":1,"choiceſ":[]}`,
		`{"id":"a","id":"b"}`, `{"choices":[{"delta":{"content":"a"},"delta":{"reasoning":"b"}}]}`,
		`{"choices":[{"index":1.0}]}`, `{"choices":[{"index":1e2}]}`, `{"choices":[{"index":"1"}]}`, `{"usage":{"prompt_tokens":1234567890123456789012}}`,
		`{"choices":[null]}`, `{"choices":[{"delta":{"tool_calls":[null]}}]}`,
		`{"error":null}`, `{"error":{"message":"m"}}`,
		"{\"id\":\"\xff\"}", "{\"id\":\"a\xc3\"}", `{"id":"\ud800"}`, `{"id":"\udc00\ud800"}`, `{"id":"\ud800\u0041"}`,
		`null`, ``, `[]`, `{"id":"x"} {}`, `{"id":"x",}`, `{"id":x}`, `{"id":"a` + "\n" + `"}`, `{"id":"\x"}`, `{"id":"\u12"}`,
		`{"x":01}`, `{"x":-}`, `{"x":1.}`, `{"x":1e}`, `{"x":tru}`, `{"x":[1,]}`, `{"x":{"a" 1}}`,
		`{"x":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`,
		`{"choices":{}}`, `{"choices":[{"delta":[]}]}`, `{"usage":[]}`, `{"id":1}`,
	} {
		sameAsUnmarshal(t, []byte(data))
	}
}

// FuzzDecodeChunk: for any input, decodeChunk agrees with json.Unmarshal.
func FuzzDecodeChunk(f *testing.F) {
	for _, data := range recordedChunks(f) {
		f.Add(data)
	}
	for _, s := range []string{`{"choices":[{"delta":{"content":"\ud83d\ude00"}}]}`, `{"Id":"x"}`, `{"usage":{"prompt_tokens":-1}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { sameAsUnmarshal(t, data) })
}

// BenchmarkDecodeChunk decodes the recorded chunks with json.Unmarshal and
// with decodeChunk.
//
//	go test -run '^$' -bench DecodeChunk ./providers/openaichat/
func BenchmarkDecodeChunk(b *testing.B) {
	chunks := recordedChunks(b)
	b.Run("json.Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, data := range chunks {
				var c chunk
				_ = json.Unmarshal(data, &c)
			}
		}
	})
	b.Run("decodeChunk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, data := range chunks {
				var c chunk
				_ = decodeChunk(data, &c)
			}
		}
	})
}
