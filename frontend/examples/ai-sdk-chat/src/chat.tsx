// useChat from @ai-sdk/react, unchanged, with Threadline as its backend:
// DefaultChatTransport({ api: "/api/v1/ui/chat" }), resume: true.
import { useChat } from "@ai-sdk/react";
import { DefaultChatTransport, type UIMessage } from "ai";
import { useEffect, useState, type FormEvent } from "react";
import { createRoot } from "react-dom/client";
import { API, chatIdFromURL, loadMessages, runBody } from "./threadline";

function Part({ part }: { part: UIMessage["parts"][number] }) {
  if (part.type === "text") return <span>{part.text}</span>;
  if (part.type === "reasoning") return <em>{part.text}</em>;
  if (part.type === "dynamic-tool") {
    const out =
      part.state === "output-available" ? ` → ${JSON.stringify(part.output)}` : part.state === "output-error" ? ` → error: ${part.errorText}` : " …";
    return (
      <div className="tool" data-testid="tool-call">
        {part.toolName}({JSON.stringify(part.input ?? {})}){out}
      </div>
    );
  }
  return null;
}

function Chat({ id, initial }: { id: string; initial: UIMessage[] }) {
  const [input, setInput] = useState("");
  const { messages, sendMessage, regenerate, stop, status, error } = useChat({
    id,
    messages: initial,
    resume: true,
    transport: new DefaultChatTransport({ api: API, body: runBody() }),
  });
  const busy = status === "submitted" || status === "streaming";
  // stop() closes the stream; the run would go on (a reload resumes it):
  // Stop also cancels it through the native API.
  const stopRun = async () => {
    const last = messages.at(-1);
    const meta = (last?.role === "assistant" ? last.metadata : undefined) as { threadId?: string; runId?: string } | undefined;
    await stop();
    if (meta?.threadId && meta.runId) await fetch(`/api/v1/threads/${meta.threadId}/runs/${meta.runId}/cancel`, { method: "POST" });
  };
  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (!input.trim() || busy) return;
    void sendMessage({ text: input });
    setInput("");
  };
  return (
    <main>
      <h1>useChat</h1>
      <ol aria-label="Conversation" style={{ listStyle: "none", padding: 0 }}>
        {messages.map((m) => (
          <li key={m.id} className={`msg ${m.role}`} data-testid={`${m.role}-message`} data-id={m.id}>
            {m.parts.map((p, i) => (
              <Part key={i} part={p} />
            ))}
          </li>
        ))}
      </ol>
      <p role="status" data-testid="status">
        {status}
      </p>
      {error ? (
        <p className="error" role="alert">
          {error.message}
        </p>
      ) : null}
      <form onSubmit={submit}>
        <input aria-label="Message" value={input} onChange={(e) => setInput(e.target.value)} placeholder="Say something" />
        {busy ? (
          <button type="button" onClick={() => void stopRun()}>
            Stop
          </button>
        ) : (
          <button type="submit">Send</button>
        )}
        <button type="button" disabled={busy || messages.length === 0} onClick={() => void regenerate()}>
          Regenerate
        </button>
      </form>
    </main>
  );
}

function App() {
  const [id] = useState(chatIdFromURL);
  const [initial, setInitial] = useState<UIMessage[] | null>(null);
  const [failed, setFailed] = useState<string | null>(null);
  useEffect(() => {
    loadMessages(id).then(setInitial, (e: Error) => setFailed(e.message));
  }, [id]);
  return (
    <>
      <nav>
        <a href="/">useChat</a>
        <a href="/assistant-ui">assistant-ui</a>
      </nav>
      {failed ? <p role="alert">{failed}</p> : initial ? <Chat id={id} initial={initial} /> : <p>Loading…</p>}
    </>
  );
}

createRoot(document.getElementById("root")!).render(<App />);
