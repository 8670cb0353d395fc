// Package openapi holds the OpenAPI 3 document of agentd's HTTP/JSON
// routes, which buf generate writes into spec/ (protoc-gen-connect-openapi,
// buf.gen.yaml) from the google.api.http annotations of the public
// services. This file is written by hand, beside spec/ and not in it:
// buf generate empties spec/ before it writes.
package openapi

import _ "embed"

// JSON is the document, as served at GET /openapi.json.
//
//go:embed spec/agentd.openapi.json
var JSON []byte
