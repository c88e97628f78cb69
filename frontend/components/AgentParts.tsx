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
import { useAuiState } from "@assistant-ui/react";
import { useEffect, useId, useState, type FC, type FormEvent } from "react";
import type { AnswerRefusal } from "@/lib/reducer";

function show(v: unknown): string {
  if (typeof v === "string") return v;
  try {
    return JSON.stringify(v, null, 2) ?? String(v);
  } catch {
    return String(v);
  }
}

/**
 * How the page sees the turn holding a part (lib/convert.ts, TurnView):
 * stale once the conversation moved on below it; its refused answers.
 */
function useTurnView(): { stale: boolean; refusal: AnswerRefusal | undefined } {
  const custom = useAuiState((s) => s.message.metadata?.custom) as { stale?: unknown; refusal?: AnswerRefusal } | undefined;
  return { stale: custom?.stale === true, refusal: custom?.refusal };
}

/** What a card says once its turn can no longer be answered. */
const STALE: Record<"ask" | "approval", string> = {
  ask: "This question was not answered; the conversation moved on.",
  approval: "This was neither approved nor rejected; the conversation moved on.",
};

type CallState = "running" | "waiting" | "done" | "error" | "interrupted";

function callState(p: ToolCallMessagePartProps, stale = false): CallState {
  if (p.result !== undefined) return p.isError ? "error" : "done";
  if (stale) return "interrupted";
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

/**
 * Approve / Reject for a server tool marked for approval; for an agent's
 * permission request (acp:<name>), a button for each of the agent's own
 * options, by its name, which goes back as that option. An answer counts
 * as sent until the service refuses it (a refusal's count moves on).
 */
const Approval: FC<{ part: ToolCallMessagePartProps }> = ({ part }) => {
  const { stale, refusal } = useTurnView();
  const [sent, setSent] = useState<{ approved: boolean; label?: string; n: number } | null>(null);
  const [failed, setFailed] = useState(false);
  const approval = part.approval;
  const refused = refusal?.n ?? 0;
  if (part.result !== undefined) return null;
  if (stale) return <p className="tool-answered muted" data-testid="stale-turn">{STALE.approval}</p>;
  if (!approval || approval.approved !== undefined || approval.resolution) return null;
  const answer = (approved: boolean, option?: { id: string; label: string }) => {
    setSent({ approved, n: refused, ...(option ? { label: option.label } : {}) });
    setFailed(false);
    part.respondToApproval(option ? { approved, optionId: option.id } : { approved }).catch(() => {
      setSent(null);
      setFailed(true);
    });
  };
  if (sent && sent.n === refused) {
    const said = sent.label ? `${sent.label}: sent.` : sent.approved ? "Approved." : "Rejected.";
    return <p className="tool-answered" role="status">{said}</p>;
  }
  const options = approval.options ?? [];
  const primary = options.find((o) => o.kind.startsWith("allow"));
  return (
    <div className="tool-approval" role="group" aria-label={`Approve ${part.toolName}?`}>
      <span>Run {part.toolName}?</span>
      {options.length > 0 ? (
        options.map((o) => (
          <button
            key={o.id}
            type="button"
            className={o === primary ? "button primary" : "button"}
            data-option={o.id}
            data-kind={o.kind}
            onClick={() => answer(o.kind.startsWith("allow"), { id: o.id, label: o.label ?? o.id })}
          >
            {o.label ?? o.id}
          </button>
        ))
      ) : (
        <>
          <button type="button" className="button primary" onClick={() => answer(true)}>
            Approve
          </button>
          <button type="button" className="button" onClick={() => answer(false)}>
            Reject
          </button>
        </>
      )}
      {failed ? <span role="alert">Not sent; try again.</span> : refusal ? <span role="alert">{refusal.message}</span> : null}
    </div>
  );
};

/** The form of ask_user: the person answers the model's question. */
const AskUser: FC<ToolCallMessagePartProps> = (part) => {
  const args = (part.args ?? {}) as { question?: unknown; choices?: unknown };
  const question = typeof args.question === "string" ? args.question : "The assistant asks:";
  const choices = Array.isArray(args.choices) ? args.choices.filter((c): c is string => typeof c === "string") : [];
  const { stale, refusal } = useTurnView();
  const refused = refusal?.n ?? 0;
  const [text, setText] = useState("");
  // The refusal count when the answer went out: a later refusal brings the form back.
  const [sentAt, setSentAt] = useState<number | null>(null);
  const sent = sentAt !== null && sentAt === refused;
  const waiting = part.result === undefined && part.status.type === "requires-action" && !stale;
  const submit = (answer: string) => {
    if (!answer.trim()) return;
    setSentAt(refused);
    part.addResult(answer);
  };
  const onSubmit = (e: FormEvent) => {
    e.preventDefault();
    submit(text);
  };
  const state = callState(part, stale);
  return (
    <div className="tool-call ask-user" data-testid="tool-call" data-tool={part.toolName} data-state={state}>
      <p className="ask-question">{question}</p>
      {part.result !== undefined ? (
        <p className="ask-answer">
          <span className="muted">Your answer: </span>
          {show(part.result)}
        </p>
      ) : stale ? (
        <p className="muted" data-testid="stale-turn">{STALE.ask}</p>
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
          {refusal ? <p role="alert">{refusal.message}</p> : null}
        </form>
      ) : (
        <p className="muted">{sent ? "Sent." : STATE_LABEL[state]}</p>
      )}
    </div>
  );
};

/**
 * How long something has been running, counted by this page from when it
 * first showed it running (a reload counts again), and how long it ran once
 * it stopped. null: never seen running here.
 */
function useRunningTime(running: boolean): { seconds: number | null; done: boolean } {
  const [start, setStart] = useState<number | null>(null);
  const [now, setNow] = useState<number | null>(null);
  const [end, setEnd] = useState<number | null>(null);
  useEffect(() => {
    if (!running) return;
    const began = Date.now();
    const tick = () => setNow(Date.now());
    const first = setTimeout(() => {
      setStart((s) => s ?? began);
      tick();
    }, 0);
    const timer = setInterval(tick, 1000);
    return () => {
      clearTimeout(first);
      clearInterval(timer);
      setEnd(Date.now());
    };
  }, [running]);
  if (start === null) return { seconds: null, done: !running };
  const until = running ? (now ?? start) : (end ?? now ?? start);
  return { seconds: Math.max(0, Math.round((until - start) / 1000)), done: !running };
}

/** A disclosure's open state, for aria-expanded beside the native one. */
function useOpen(initial: boolean) {
  const [open, setOpen] = useState(initial);
  return { open, onToggle: (e: { currentTarget: HTMLDetailsElement }) => setOpen(e.currentTarget.open) };
}

const Chevron: FC = () => (
  <svg className="chevron" width="12" height="12" viewBox="0 0 12 12" aria-hidden="true" focusable="false">
    <path d="M4 2.5 7.5 6 4 9.5" fill="none" stroke="currentColor" strokeWidth="1.6" strokeLinecap="round" strokeLinejoin="round" />
  </svg>
);

/** Any other tool call: name, state, arguments and result in a disclosure. */
export const ToolCall: FC<ToolCallMessagePartProps> = (part) => {
  const { stale } = useTurnView();
  const state = callState(part, stale);
  const { open, onToggle } = useOpen(state === "waiting" || state === "error");
  const { seconds } = useRunningTime(state === "running");
  const bodyId = useId();
  return (
    <div className="tool-call" data-testid="tool-call" data-tool={part.toolName} data-state={state}>
      <details open={open} onToggle={onToggle}>
        <summary aria-expanded={open} aria-controls={bodyId}>
          <Chevron />
          <span className="tool-name">{part.toolName}</span>
          <span className={`tool-state tool-${state}`} data-testid="tool-state">
            {state === "running" ? <span className="spinner" aria-hidden="true" /> : null}
            {STATE_LABEL[state]}
            {state === "running" && seconds !== null ? <span data-testid="tool-elapsed"> {seconds} s</span> : null}
          </span>
        </summary>
        <div className="tool-body" id={bodyId}>
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

/** Reasoning, collapsed by default: "Thinking…" while it streams, then how long it took. */
export const Reasoning: FC<ReasoningMessagePartProps> = ({ text, status }) => {
  const running = status.type === "running";
  const { seconds } = useRunningTime(running);
  const { open, onToggle } = useOpen(false);
  const label = running ? "Thinking…" : seconds !== null ? `Thought for ${Math.max(1, seconds)} s` : "Reasoning";
  return (
    <details className="reasoning" data-testid="reasoning" open={open} onToggle={onToggle}>
      <summary aria-expanded={open}>
        <Chevron />
        {running ? <span className="spinner" aria-hidden="true" /> : null}
        <span data-testid="reasoning-label">{label}</span>
      </summary>
      <p>{text}</p>
    </details>
  );
};

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

const TASK_LABEL = { done: "Done", active: "In progress", todo: "To do" } as const;

/** A task's state as a picture with words (not a control: nothing to click). */
const TaskIcon: FC<{ state: keyof typeof TASK_LABEL }> = ({ state }) => (
  <span className={`task-icon task-${state}`} role="img" aria-label={TASK_LABEL[state]} data-testid="task-icon">
    <svg width="16" height="16" viewBox="0 0 16 16" aria-hidden="true" focusable="false">
      <circle cx="8" cy="8" r="6.5" fill={state === "done" ? "currentColor" : "none"} stroke="currentColor" strokeWidth="1.5" />
      {state === "done" ? (
        <path d="M5 8.2 7.1 10.3 11 6" fill="none" stroke="var(--bg)" strokeWidth="1.7" strokeLinecap="round" strokeLinejoin="round" />
      ) : state === "active" ? (
        <path d="M8 1.5a6.5 6.5 0 0 1 0 13z" fill="currentColor" />
      ) : null}
    </svg>
  </span>
);

/** A plan: its tasks as a checklist that ticks as they finish. */
const Plan: FC<DataMessagePartProps> = ({ data }) => {
  const { title, tasks } = tasksOf(data);
  return (
    <section className="plan" data-testid="plan" aria-label={title ?? "Plan"}>
      <h3>{title ?? "Plan"}</h3>
      <ul>
        {tasks.map((t, i) => (
          <li key={i} className={t.done ? "done" : t.active ? "active" : ""} data-done={t.done}>
            <TaskIcon state={t.done ? "done" : t.active ? "active" : "todo"} />
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
