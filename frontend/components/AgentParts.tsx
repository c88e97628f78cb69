"use client";

// How an agent turn's parts look (API.md, "Agent runs"): tool calls with
// their arguments, state and result, collapsible; reasoning collapsed; a plan
// as a checklist; a file list; approval buttons and the form of the app's
// client tool. Rendered through MessagePrimitive.Parts' own slots.

import type {
  DataMessagePartProps,
  ReasoningMessagePartProps,
  ToolCallMessagePartProps,
} from "@assistant-ui/react";
import { useState, type FC, type FormEvent } from "react";

function show(v: unknown): string {
  if (typeof v === "string") return v;
  try {
    return JSON.stringify(v, null, 2) ?? String(v);
  } catch {
    return String(v);
  }
}

type CallState = "running" | "waiting" | "done" | "error" | "interrupted";

function callState(p: ToolCallMessagePartProps): CallState {
  if (p.result !== undefined) return p.isError ? "error" : "done";
  if (p.status.type === "requires-action" || p.approval) return "waiting";
  if (p.status.type === "running") return "running";
  return "interrupted";
}

const STATE_LABEL: Record<CallState, string> = {
  running: "running…",
  waiting: "waiting for you",
  done: "done",
  error: "failed",
  interrupted: "not answered",
};

/** Approve / Reject for a server tool marked for approval. */
const Approval: FC<{ part: ToolCallMessagePartProps }> = ({ part }) => {
  const [sent, setSent] = useState<"approved" | "rejected" | null>(null);
  const [failed, setFailed] = useState(false);
  const approval = part.approval;
  if (!approval || approval.approved !== undefined || approval.resolution) return null;
  const answer = (approved: boolean) => {
    setSent(approved ? "approved" : "rejected");
    setFailed(false);
    part.respondToApproval({ approved }).catch(() => {
      setSent(null);
      setFailed(true);
    });
  };
  if (sent) return <p className="tool-answered" role="status">{sent === "approved" ? "Approved." : "Rejected."}</p>;
  return (
    <div className="tool-approval" role="group" aria-label={`Approve ${part.toolName}?`}>
      <span>Run {part.toolName}?</span>
      <button type="button" className="button primary" onClick={() => answer(true)}>
        Approve
      </button>
      <button type="button" className="button" onClick={() => answer(false)}>
        Reject
      </button>
      {failed ? <span role="alert">Not sent; try again.</span> : null}
    </div>
  );
};

/** The form of ask_user: the person answers the model's question. */
const AskUser: FC<ToolCallMessagePartProps> = (part) => {
  const args = (part.args ?? {}) as { question?: unknown; choices?: unknown };
  const question = typeof args.question === "string" ? args.question : "The assistant asks:";
  const choices = Array.isArray(args.choices) ? args.choices.filter((c): c is string => typeof c === "string") : [];
  const [text, setText] = useState("");
  const [sent, setSent] = useState(false);
  const waiting = part.result === undefined && part.status.type === "requires-action";
  const submit = (answer: string) => {
    if (!answer.trim()) return;
    setSent(true);
    part.addResult(answer);
  };
  const onSubmit = (e: FormEvent) => {
    e.preventDefault();
    submit(text);
  };
  return (
    <div className="tool-call ask-user" data-testid="tool-call" data-tool={part.toolName} data-state={callState(part)}>
      <p className="ask-question">{question}</p>
      {part.result !== undefined ? (
        <p className="ask-answer">
          <span className="muted">Your answer: </span>
          {show(part.result)}
        </p>
      ) : waiting && !sent ? (
        <form className="ask-form" onSubmit={onSubmit}>
          {choices.map((c) => (
            <button key={c} type="button" className="button" onClick={() => submit(c)}>
              {c}
            </button>
          ))}
          <input
            aria-label="Your answer"
            value={text}
            onChange={(e) => setText(e.target.value)}
            placeholder="Your answer"
          />
          <button type="submit" className="button primary" disabled={!text.trim()}>
            Answer
          </button>
        </form>
      ) : (
        <p className="muted">{sent ? "Sent." : STATE_LABEL[callState(part)]}</p>
      )}
    </div>
  );
};

/** Any other tool call: name, state, arguments and result in a disclosure. */
export const ToolCall: FC<ToolCallMessagePartProps> = (part) => {
  const state = callState(part);
  return (
    <div className="tool-call" data-testid="tool-call" data-tool={part.toolName} data-state={state}>
      <details open={state === "waiting" || state === "error"}>
        <summary>
          <span className="tool-name">{part.toolName}</span>
          <span className={`tool-state tool-${state}`}>{STATE_LABEL[state]}</span>
        </summary>
        <div className="tool-body">
          <div className="tool-label">Arguments</div>
          <pre className="tool-args">{part.argsText || show(part.args)}</pre>
          {part.result !== undefined ? (
            <>
              <div className="tool-label">{part.isError ? "Error" : "Result"}</div>
              <pre className={part.isError ? "tool-result tool-error" : "tool-result"} data-testid="tool-result">
                {show(part.result)}
              </pre>
            </>
          ) : null}
        </div>
      </details>
      <Approval part={part} />
    </div>
  );
};

export const TOOLS = { by_name: { ask_user: AskUser }, Fallback: ToolCall };

/** Reasoning, collapsed by default. */
export const Reasoning: FC<ReasoningMessagePartProps> = ({ text, status }) => (
  <details className="reasoning" data-testid="reasoning">
    <summary>{status.type === "running" ? "Thinking…" : "Reasoning"}</summary>
    <p>{text}</p>
  </details>
);

type Task = { title: string; done: boolean; active: boolean };

function tasksOf(data: unknown): { title?: string; tasks: Task[] } {
  const d = (data ?? {}) as { title?: unknown; tasks?: unknown; steps?: unknown };
  const raw = Array.isArray(d.tasks) ? d.tasks : Array.isArray(d.steps) ? d.steps : Array.isArray(data) ? data : [];
  const tasks = raw.map((t): Task => {
    if (typeof t === "string") return { title: t, done: false, active: false };
    const o = (t ?? {}) as Record<string, unknown>;
    const title = [o.title, o.text, o.name, o.content, o.description].find((x): x is string => typeof x === "string");
    const status = typeof o.status === "string" ? o.status : "";
    const done = o.done === true || ["done", "completed", "complete", "succeeded"].includes(status);
    return { title: title ?? show(t), done, active: ["in_progress", "running", "active"].includes(status) };
  });
  return { ...(typeof d.title === "string" ? { title: d.title } : {}), tasks };
}

/** A plan: its tasks as a checklist that ticks as they finish. */
const Plan: FC<DataMessagePartProps> = ({ data }) => {
  const { title, tasks } = tasksOf(data);
  return (
    <section className="plan" data-testid="plan" aria-label={title ?? "Plan"}>
      <h3>{title ?? "Plan"}</h3>
      <ul>
        {tasks.map((t, i) => (
          <li key={i} className={t.done ? "done" : t.active ? "active" : ""} data-done={t.done}>
            <input type="checkbox" checked={t.done} readOnly aria-label={t.title} tabIndex={-1} />
            <span>{t.title}</span>
          </li>
        ))}
      </ul>
    </section>
  );
};

type FileEntry = { filepath?: string; filename?: string; url?: string };

/** The files a turn produced, with links. */
const Files: FC<DataMessagePartProps> = ({ data }) => {
  const files = (Array.isArray(data) ? data : []) as FileEntry[];
  return (
    <section className="files" data-testid="files" aria-label="Files">
      <h3>Files</h3>
      <ul>
        {files.map((f, i) => {
          const name = f.filename ?? f.filepath ?? `file ${i + 1}`;
          return (
            <li key={i}>
              {f.url && f.url.startsWith("data:") ? (
                // Content in the link itself: saved, never opened as a page.
                <a href={f.url} download={f.filename ?? name}>
                  {name}
                </a>
              ) : f.url ? (
                <a href={f.url} target="_blank" rel="noopener noreferrer">
                  {name}
                </a>
              ) : (
                name
              )}
              {f.filepath && f.filepath !== name ? <span className="muted"> {f.filepath}</span> : null}
            </li>
          );
        })}
      </ul>
    </section>
  );
};

/** Any other data part: its name and JSON, collapsed. */
const DataFallback: FC<DataMessagePartProps> = ({ name, data }) => (
  <details className="data-part" data-testid="data-part">
    <summary>{name}</summary>
    <pre>{show(data)}</pre>
  </details>
);

export const DATA = { by_name: { plan: Plan, files: Files }, Fallback: DataFallback };
