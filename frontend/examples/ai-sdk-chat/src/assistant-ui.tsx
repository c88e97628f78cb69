// assistant-ui's AI SDK runtime (useChatRuntime with its
// AssistantChatTransport) against the same route, POST /api/v1/ui/chat.
import { AssistantRuntimeProvider, ComposerPrimitive, MessagePrimitive, ThreadPrimitive, type ToolCallMessagePartComponent } from "@assistant-ui/react";
import { AssistantChatTransport, useChatRuntime } from "@assistant-ui/react-ai-sdk";
import { createRoot } from "react-dom/client";
import { API, runBody } from "./threadline";

const ToolCall: ToolCallMessagePartComponent = ({ toolName, args, result }) => (
  <div className="tool" data-testid="tool-call">
    {toolName}({JSON.stringify(args)}){result === undefined ? " …" : ` → ${JSON.stringify(result)}`}
  </div>
);

const UserMessage = () => (
  <MessagePrimitive.Root className="msg user" data-testid="user-message">
    <MessagePrimitive.Parts />
  </MessagePrimitive.Root>
);

const AssistantMessage = () => (
  <MessagePrimitive.Root className="msg assistant" data-testid="assistant-message">
    <MessagePrimitive.Parts components={{ tools: { Fallback: ToolCall } }} />
  </MessagePrimitive.Root>
);

function App() {
  const runtime = useChatRuntime({ transport: new AssistantChatTransport({ api: API, body: runBody() }) });
  return (
    <AssistantRuntimeProvider runtime={runtime}>
      <nav>
        <a href="/">useChat</a>
        <a href="/assistant-ui">assistant-ui</a>
      </nav>
      <main>
        <h1>assistant-ui</h1>
        <ThreadPrimitive.Root>
          <ThreadPrimitive.Viewport>
            <ThreadPrimitive.Messages components={{ UserMessage, AssistantMessage }} />
          </ThreadPrimitive.Viewport>
          <ComposerPrimitive.Root>
            <ComposerPrimitive.Input aria-label="Message" placeholder="Say something" />
            <ComposerPrimitive.Send>Send</ComposerPrimitive.Send>
          </ComposerPrimitive.Root>
        </ThreadPrimitive.Root>
      </main>
    </AssistantRuntimeProvider>
  );
}

createRoot(document.getElementById("root")!).render(<App />);
