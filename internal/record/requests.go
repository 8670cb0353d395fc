package record

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/agentd/agentd/internal/fault"
	"github.com/agentd/agentd/internal/sealer"
)

// A live generation's pending requests and their decisions, and the
// items of threads (thread.go), are kept in the store as a generation's
// agent is: sealed under the store's key when there is one
// (store.encryption_key_file), each bound to its tenant and to what it
// is (a generation's request, a thread's item), so that none can be moved
// to another; in the clear without a key (the caller leaves out what must
// never be stored so). The first byte says which.
const (
	inClear byte = 'c'
	sealed  byte = 's'
)

// What a sealed message is: its additional data says so, so that a
// request cannot pass for a decision.
const (
	purposeRequest  = "request"
	purposeDecision = "decision"
)

// SealRequest encodes m, tenant's generation id's pending request
// requestID, for the store.
func SealRequest(k *sealer.Keyring, tenant, id, requestID string, m proto.Message) []byte {
	return seal(k, purposeRequest, tenant, id, requestID, m)
}

// OpenRequest decodes into m what SealRequest encoded.
func OpenRequest(k *sealer.Keyring, tenant, id, requestID string, data []byte, m proto.Message) error {
	return open(k, purposeRequest, tenant, id, requestID, data, m)
}

// SealDecision encodes m, the decision of tenant's generation id's
// request requestID, for the store.
func SealDecision(k *sealer.Keyring, tenant, id, requestID string, m proto.Message) []byte {
	return seal(k, purposeDecision, tenant, id, requestID, m)
}

// OpenDecision decodes into m what SealDecision encoded.
func OpenDecision(k *sealer.Keyring, tenant, id, requestID string, data []byte, m proto.Message) error {
	return open(k, purposeDecision, tenant, id, requestID, data, m)
}

func requestAAD(purpose, tenant, id, requestID string) []byte {
	return []byte(tenant + "\x00" + id + "\x00" + purpose + "\x00" + requestID)
}

func seal(k *sealer.Keyring, purpose, tenant, id, requestID string, m proto.Message) []byte {
	return sealMessage(k, requestAAD(purpose, tenant, id, requestID), m)
}

func open(k *sealer.Keyring, purpose, tenant, id, requestID string, data []byte, m proto.Message) error {
	what := fmt.Sprintf("the %s %q of generation %q", purpose, requestID, id)
	return openMessage(k, requestAAD(purpose, tenant, id, requestID), data, m, what)
}

// sealMessage encodes m for the store: sealed under k bound to aad, or
// in the clear without a key; the first byte says which.
func sealMessage(k *sealer.Keyring, aad []byte, m proto.Message) []byte {
	plain, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		panic("encoding a message to store: " + err.Error()) // messages built here encode
	}
	if k == nil {
		return append([]byte{inClear}, plain...)
	}
	return append([]byte{sealed}, k.Seal(plain, aad)...)
}

// openMessage decodes into m what sealMessage encoded; what names it in
// errors.
func openMessage(k *sealer.Keyring, aad, data []byte, m proto.Message, what string) error {
	if len(data) == 0 {
		return fault.New(fault.FailedPrecondition, "%s is not stored", what)
	}
	plain := data[1:]
	switch data[0] {
	case inClear:
	case sealed:
		if k == nil {
			return fault.New(fault.FailedPrecondition, "%s is sealed, and this agentd has no encryption key (store.encryption_key_file)", what)
		}
		var err error
		if plain, _, err = k.Open(plain, aad); err != nil {
			return fault.New(fault.FailedPrecondition, "%s is sealed under a key that is not one of this agentd's", what)
		}
	default:
		return fault.New(fault.FailedPrecondition, "%s cannot be read by this agentd", what)
	}
	if err := proto.Unmarshal(plain, m); err != nil {
		return fault.New(fault.FailedPrecondition, "%s cannot be read by this agentd", what)
	}
	return nil
}
