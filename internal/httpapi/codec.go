package httpapi

import (
	"connectrpc.com/connect"
	"connectrpc.com/vanguard"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// strictJSON is vanguard's JSON codec refusing what it cannot read whole:
// a field the message does not have (a misspelt one would otherwise be
// dropped without a word) and a body that is not JSON, each
// INVALID_ARGUMENT (400) saying what and where.
type strictJSON struct{ *vanguard.JSONCodec }

func newStrictJSON(res vanguard.TypeResolver) vanguard.Codec {
	c := vanguard.NewJSONCodec(res)
	c.UnmarshalOptions.DiscardUnknown = false
	return strictJSON{c}
}

func (c strictJSON) Unmarshal(data []byte, msg proto.Message) error {
	return invalid(c.JSONCodec.Unmarshal(data, msg))
}

func (c strictJSON) UnmarshalField(data []byte, msg proto.Message, field protoreflect.FieldDescriptor) error {
	return invalid(c.JSONCodec.UnmarshalField(data, msg, field))
}

// invalid is err, a body that cannot be read, as the caller's error.
func invalid(err error) error {
	if err == nil {
		return nil
	}
	return connect.NewError(connect.CodeInvalidArgument, err)
}
