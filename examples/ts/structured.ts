// Asks for the final answer as data, and reads it as a TypeScript
// interface. The agent in examples/structured-start.json calls the demo
// server's echo tool, then answers; this example sets its output
// (Agent.output) to a Ticket's JSON Schema, so the answer must be JSON that
// fits it, which agentd checks and sends in the completed event
// (completed.structured, a google.protobuf.Value). An answer the schema
// refuses arrives as outputInvalid, and the model gets a turn to repair
// it. Its options (--token, --tls-ca, --tls-cert, --tls-key) are every
// example's: see examples/ts/connect.ts.
//
//   npx tsc -p examples/ts && node build/ts/examples/ts/structured.js [options] [address] [request.json]
import { create, fromJson, toJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { createClient } from "@connectrpc/connect";
import { readFileSync } from "node:fs";

import { OutputSchema } from "../../gen/ts/agentd/v1/agent_pb.js";
import {
  AgentService,
  GenerateRequestSchema,
  StartGenerationSchema,
  type GenerateRequest,
} from "../../gen/ts/agentd/v1/agent_service_pb.js";
import { connect } from "./connect.js";

/** The answer asked for. */
interface Ticket {
  title: string;
  priority: "low" | "medium" | "high";
  tags: string[];
}

// Ticket's JSON Schema. It keeps the rules of the providers that hold a
// model to a schema exactly (every object closed, every property
// required), so Output.strict can ask them to.
const ticketSchema: JsonObject = {
  type: "object",
  properties: {
    title: { type: "string", description: "The problem, in a few words." },
    priority: { type: "string", enum: ["low", "medium", "high"] },
    tags: { type: "array", items: { type: "string" } },
  },
  required: ["title", "priority", "tags"],
  additionalProperties: false,
};

const { requestFile, transport, headers } = connect("examples/structured-start.json");
const start = fromJson(StartGenerationSchema, JSON.parse(readFileSync(requestFile, "utf8")) as JsonValue);
start.agent!.output = create(OutputSchema, {
  name: "ticket",
  description: "A ticket filed from the user's report.",
  schema: ticketSchema,
  strict: true,
});

async function* requests(): AsyncIterable<GenerateRequest> {
  yield create(GenerateRequestSchema, { kind: { case: "start", value: start } });
}

const client = createClient(AgentService, transport);
let ticket: Ticket | undefined;
for await (const event of client.generate(requests(), { timeoutMs: 30_000, headers })) {
  const e = event.event;
  switch (e.case) {
    case "started":
      console.log("started", e.value.generationId);
      break;
    case "toolCallFinished":
      console.log("tool_call_finished", e.value.toolName, e.value.output);
      break;
    case "outputInvalid":
      console.log(`output_invalid turn ${e.value.turn} (repair ${e.value.repair}):`, e.value.errors.join("; "));
      break;
    case "completed":
      // agentd has checked the answer against the schema: it is a Ticket.
      if (e.value.structured) ticket = toJson(ValueSchema, e.value.structured) as unknown as Ticket;
      break;
  }
}
if (!ticket) {
  console.error("typescript structured example: the generation completed without a structured answer");
  process.exit(1);
}
console.log(`ticket: [${ticket.priority}] ${ticket.title} (${ticket.tags.join(", ")})`);
