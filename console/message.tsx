// One message of a conversation as a speech bubble: who said it, then its
// parts in order (text, tool calls with their arguments, tool results as
// text, media and reasoning named), all rendered as text.
import { Role, type Message, type Part } from "../gen/ts/agentd/v1/message_pb.js";
import { prettyJSON } from "./format.js";

const speakers: Record<Role, string> = {
  [Role.UNSPECIFIED]: "Unknown",
  [Role.USER]: "User",
  [Role.ASSISTANT]: "Assistant",
  [Role.TOOL]: "Tool results",
};

export function MessageView({ message }: { message?: Message }) {
  if (!message) return null;
  const role = message.role;
  return (
    <div class={`bubble ${Role[role]?.toLowerCase() ?? ""}`}>
      <p class="speaker">{speakers[role] ?? "Unknown"}</p>
      {message.parts.map((p, i) => (
        <PartView key={i} part={p} />
      ))}
    </div>
  );
}

function PartView({ part }: { part: Part }) {
  const k = part.kind;
  switch (k.case) {
    case "text":
      return <p class="said">{k.value}</p>;
    case "toolCall":
      return (
        <>
          <p class="what">Calls {k.value.name}</p>
          <pre data-testid="arguments">{prettyJSON(k.value.arguments)}</pre>
        </>
      );
    case "toolResult":
      return (
        <>
          <p class="what">
            {k.value.name || "A tool"} {k.value.isError ? "failed" : "answered"}
          </p>
          <pre data-testid="output">{k.value.output}</pre>
        </>
      );
    case "providerToolCall":
      return (
        <>
          <p class="what">
            The provider called {k.value.serverName} / {k.value.toolName}
          </p>
          <pre data-testid="arguments">{prettyJSON(k.value.arguments)}</pre>
          <pre data-testid="output">{k.value.output}</pre>
        </>
      );
    case "media":
      return <p class="what">Media: {[k.value.name, k.value.mimeType].filter(Boolean).join(", ")}</p>;
    case "reasoning":
      return (
        <details>
          <summary>Reasoning</summary>
          <pre>{k.value.redacted ? "(redacted by the provider)" : k.value.text}</pre>
        </details>
      );
    default:
      return null;
  }
}
