package app_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	agentdv1 "github.com/agentd/agentd/gen/go/agentd/v1"
	"github.com/agentd/agentd/internal/app"
	"github.com/agentd/agentd/internal/app/apptest"
	"github.com/agentd/agentd/internal/config"
)

// The model's answer in BenchmarkTextLatency: textChunks chunks, one every
// textEvery, as a model streams its words.
const (
	textChunks = 40
	textEvery  = 2 * time.Millisecond
)

// BenchmarkTextLatency measures how late the model's words reach the
// client of a durable generation, on each store: an agentd served as
// `agentd serve` serves it (in-memory listener, interceptors), the openai
// provider pointed at a fake Chat Completions server in this process that
// streams an answer of textChunks chunks, one every textEvery, each
// stamped with the time it was written. The client takes each text_delta
// as it comes and reads the stamp: the latency is from the provider's
// chunk to the client's event, through the provider's codec, the
// generation's record and its stream. It reports the median and p90 over
// all generations of the first chunk's latency, and of the later chunks'
// (target: a median of at most 2 ms for both).
func BenchmarkTextLatency(b *testing.B) {
	for _, driver := range benchStores {
		b.Run(driver, func(b *testing.B) {
			cfg := benchStoreConfig(b, driver)
			srv := httptest.NewServer(http.HandlerFunc(stampedAnswer))
			b.Cleanup(srv.Close)
			cfg.Providers = map[string]config.Provider{"openai": {APIKey: "bench-key", BaseURL: srv.URL + "/v1"}}
			conn, _ := apptest.Serve(b, app.Options{Config: cfg, Logger: slog.New(slog.DiscardHandler)})
			client := agentdv1.NewAgentServiceClient(conn)
			start := &agentdv1.GenerateRequest{Kind: &agentdv1.GenerateRequest_Start{Start: &agentdv1.StartGeneration{
				Agent:    &agentdv1.Agent{Provider: "openai", Model: "gpt-4o-mini"},
				Messages: []*agentdv1.Message{{Role: agentdv1.Role_ROLE_USER, Parts: []*agentdv1.Part{{Kind: &agentdv1.Part_Text{Text: "say something"}}}}},
			}}}
			streamed(b, client, start) // connect, warm up
			var first, later []time.Duration
			for b.Loop() {
				lat := streamed(b, client, start)
				first, later = append(first, lat[0]), append(later, lat[1:]...)
			}
			b.ReportMetric(quantile(first, 0.5), "first-chunk-p50-ms")
			b.ReportMetric(quantile(first, 0.9), "first-chunk-p90-ms")
			b.ReportMetric(quantile(later, 0.5), "later-chunk-p50-ms")
			b.ReportMetric(quantile(later, 0.9), "later-chunk-p90-ms")
		})
	}
}

// streamed runs one generation of start to its end and returns the latency
// of each of its text chunks, in order.
func streamed(b *testing.B, client agentdv1.AgentServiceClient, start *agentdv1.GenerateRequest) []time.Duration {
	var lat []time.Duration
	for ev := range generated(b, client, start) {
		if d := ev.GetTextDelta(); d != nil {
			now := time.Now()
			for _, stamp := range strings.Fields(d.GetText()) {
				ns, err := strconv.ParseInt(stamp, 10, 64)
				if err != nil {
					b.Fatalf("text %q is not stamps", d.GetText())
				}
				lat = append(lat, now.Sub(time.Unix(0, ns)))
			}
		}
	}
	if len(lat) != textChunks {
		b.Fatalf("the client got %d chunks; want %d", len(lat), textChunks)
	}
	return lat
}

// generated runs one generation of start on client and yields its events
// as they come, to the stream's end; it fails b on an error.
func generated(b testing.TB, client agentdv1.AgentServiceClient, start *agentdv1.GenerateRequest) iter.Seq[*agentdv1.GenerateResponse] {
	return func(yield func(*agentdv1.GenerateResponse) bool) {
		stream, err := client.Generate(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if err := stream.Send(start); err != nil {
			b.Fatal(err)
		}
		if err := stream.CloseSend(); err != nil {
			b.Fatal(err)
		}
		for {
			ev, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				b.Fatal(err)
			}
			if !yield(ev) {
				return
			}
		}
	}
}

// stampedAnswer streams a Chat Completions answer of textChunks chunks,
// one every textEvery, each the time it is written (Unix nanoseconds).
func stampedAnswer(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "text/event-stream")
	flusher, _ := w.(http.Flusher)
	for range textChunks {
		fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"%d \"},\"finish_reason\":null}]}\n\n", time.Now().UnixNano())
		flusher.Flush()
		time.Sleep(textEvery)
	}
	fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n")
	fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":40}}\n\ndata: [DONE]\n\n")
}

// quantile is the q-quantile of ds, in milliseconds.
func quantile(ds []time.Duration, q float64) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[int(q*float64(len(s)-1))]) / float64(time.Millisecond)
}
