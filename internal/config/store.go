package config

import (
	"slices"
	"time"
)

// The store drivers.
const (
	StoreSQLite   = "sqlite"
	StorePostgres = "postgres"
)

// Store says where agentd keeps its durable state: its generations,
// paused and running, and their records. SQLite keeps it in state_dir,
// PostgreSQL anywhere. Every replica that shares a
// store resumes the others' paused generations, and adopts the running
// ones of a replica that died.
type Store struct {
	// Driver is the kind of database: sqlite, agentd.db in state_dir,
	// which needs no set-up and which replicas on one machine may share;
	// or postgres, the PostgreSQL database that dsn names, which replicas
	// on several machines share. Either way agentd migrates the schema at
	// start (replicas starting together are safe).
	Driver string `yaml:"driver" env:"AGENTD_STORE_DRIVER" enum:"sqlite,postgres"`
	// DSN is the PostgreSQL connection string, required with driver
	// postgres and only with it: a URL
	// (postgres://user:password@host:5432/agentd?sslmode=verify-full) or
	// libpq's key=value pairs. pgxpool's pool_max_conns and the other
	// pool_* parameters size the pool. Secret: never logged, nor said in
	// an error; its variable keeps it out of the file.
	DSN string `yaml:"dsn" env:"AGENTD_STORE_DSN"`
	// PingInterval is how often `agentd serve` checks that the store
	// answers (and that a remote bridge, bridge.address, answers its
	// health check). While the store does not, the AgentService's health
	// and "readiness" are NOT_SERVING (health's overall status, "", and
	// "liveness" stay SERVING: the process is alive) and every Generate
	// stream, new or resuming, fails UNAVAILABLE with a RetryInfo of this
	// interval; the first check that passes makes it SERVING again, unless
	// the other dependency is down.
	PingInterval time.Duration `yaml:"ping_interval"`
	// EncryptionKeyFile names a file holding the 32-byte key (raw, hex or
	// base64) that seals a running generation's agent declaration,
	// secrets included, in its checkpoint (AES-256-GCM), so that another
	// replica can adopt it, and a resume may leave the agent out. Every
	// replica sharing the store needs the same key. Without one, the
	// declaration is stored without its secrets (authorization, headers,
	// env values), and a generation whose agent had any fails when
	// another replica would adopt it, and needs its agent given again to
	// resume.
	//
	// The same key seals the OAuth tokens that agentd keeps for MCP
	// servers, bound to their tenant, end user and server; without one,
	// those tokens are kept in the process's memory only.
	EncryptionKeyFile string `yaml:"encryption_key_file" env:"AGENTD_STORE_ENCRYPTION_KEY_FILE"`
	// PreviousEncryptionKeyFiles name the files of keys that
	// encryption_key_file replaced (a rotation), in the same forms: what
	// they sealed is still opened, and sealed again under the current key
	// as agentd uses it (an OAuth token when it is read, a generation's
	// agent at its next checkpoint). Needs encryption_key_file; none may
	// be it or repeat another.
	PreviousEncryptionKeyFiles []string `yaml:"previous_encryption_key_files" env:"AGENTD_STORE_PREVIOUS_ENCRYPTION_KEY_FILES"`
}

// validate checks store. Its driver is checked by its enum. The DSN's
// syntax is the store's to check when it opens; no message here quotes
// it.
func (s Store) validate(bad func(string, ...any)) {
	switch {
	case s.Driver == StoreSQLite && s.DSN != "":
		bad("store.dsn: set, but store.driver is sqlite, which does not use it; set store.driver: postgres (AGENTD_STORE_DRIVER=postgres) to use PostgreSQL")
	case s.Driver == StorePostgres && s.DSN == "":
		bad("store.dsn: required with store.driver postgres (or AGENTD_STORE_DSN)")
	}
	positive(bad, "store.ping_interval", s.PingInterval)
	s.validatePreviousKeys(bad)
}

// validatePreviousKeys checks store.previous_encryption_key_files: the
// keys a rotation replaced, beside the one that replaced them.
func (s Store) validatePreviousKeys(bad func(string, ...any)) {
	if len(s.PreviousEncryptionKeyFiles) > 0 && s.EncryptionKeyFile == "" {
		bad("store.previous_encryption_key_files: needs store.encryption_key_file, the key that replaced them")
	}
	for i, f := range s.PreviousEncryptionKeyFiles {
		switch {
		case f == "":
			bad("store.previous_encryption_key_files[%d]: empty", i)
		case f == s.EncryptionKeyFile:
			bad("store.previous_encryption_key_files[%d]: is store.encryption_key_file; a rotation puts a new key there", i)
		case slices.Contains(s.PreviousEncryptionKeyFiles[:i], f):
			bad("store.previous_encryption_key_files[%d]: listed twice", i)
		}
	}
}
