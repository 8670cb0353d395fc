package registry

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentd/agentd/internal/config"
)

// Provider keys and base URLs come from the file, else from the variables
// Declared names.
func TestConfigure(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		file map[string]config.Provider
		env  map[string]string
		want map[string]config.Provider
	}{
		{name: "nothing set", want: nil},
		{
			name: "the file wins over the environment",
			file: map[string]config.Provider{"openai": {APIKey: "file-key"}},
			env:  map[string]string{"OPENAI_API_KEY": "env-key", "OPENAI_BASE_URL": "https://gw.example/v1"},
			want: map[string]config.Provider{
				"openai":           {APIKey: "file-key", BaseURL: "https://gw.example/v1"},
				"openai-responses": {APIKey: "env-key", BaseURL: "https://gw.example/v1"},
			},
		},
		{
			name: "GEMINI_API_KEY before GOOGLE_API_KEY",
			env:  map[string]string{"GEMINI_API_KEY": "gem", "GOOGLE_API_KEY": "goo"},
			want: map[string]config.Provider{"gemini": {APIKey: "gem"}},
		},
		{
			name: "GOOGLE_API_KEY alone",
			env:  map[string]string{"GOOGLE_API_KEY": "goo"},
			want: map[string]config.Provider{"gemini": {APIKey: "goo"}},
		},
		{
			name: "OLLAMA_HOST as host:port gets http://, no other base URL does",
			env:  map[string]string{"OLLAMA_HOST": "gpu:11434", "AZURE_OPENAI_ENDPOINT": "my.openai.azure.com"},
			want: map[string]config.Provider{"ollama": {BaseURL: "http://gpu:11434"}, "azure": {BaseURL: "my.openai.azure.com"}},
		},
		{
			name: "a provider in the file stays, configured or not",
			file: map[string]config.Provider{"requesty": {}},
			want: map[string]config.Provider{"requesty": {}},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Configure(tt.file, func(k string) string { return tt.env[k] })
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("providers (-want +got):\n%s", diff)
			}
		})
	}
}

func TestUnknownProvider(t *testing.T) {
	t.Parallel()
	file := map[string]config.Provider{"anthropc": {}}
	want := "providers.anthropc: unknown provider; one of anthropic, azure, deepseek, gemini, ollama, openai, openai-responses, openrouter, requesty"
	if _, err := Configure(file, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Configure = %v; want %q", err, want)
	}
	if _, err := New(file); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("New = %v; want %q", err, want)
	}
}
