"use client";

// Per-chat settings: a small popover from the chat's toolbar with the
// system prompt, temperature, model and max steps. Saved in the thread's
// metadata (lib/chatSettings) and sent in each run's run_config.

import { useEffect, useId, useRef, useState, type FC, type FormEvent } from "react";
import { getThread } from "@/lib/api";
import { rememberSettings, saveSettings, settingsFrom, type ChatSettings } from "@/lib/chatSettings";
import { modelLabel, useModels } from "./ModelPicker";
import "./branches.css";

type Draft = { system: string; temperature: string; model: string; max_steps: string };

const toDraft = (s: ChatSettings): Draft => ({
  system: s.system ?? "",
  temperature: s.temperature !== undefined ? String(s.temperature) : "",
  model: s.model ?? "",
  max_steps: s.max_steps !== undefined ? String(s.max_steps) : "",
});

/** The draft as settings, or what is wrong with it. */
export function fromDraft(d: Draft): ChatSettings | string {
  const out: ChatSettings = {};
  if (d.system.trim()) out.system = d.system;
  if (d.temperature.trim()) {
    const t = Number(d.temperature);
    if (!Number.isFinite(t) || t < 0 || t > 2) return "Temperature is a number from 0 to 2.";
    out.temperature = t;
  }
  if (d.model) out.model = d.model;
  if (d.max_steps.trim()) {
    const n = Number(d.max_steps);
    if (!Number.isInteger(n) || n < 1 || n > 100) return "Max steps is a whole number from 1 to 100.";
    out.max_steps = n;
  }
  return out;
}

export const ChatSettingsButton: FC<{ threadId: string }> = ({ threadId }) => {
  const [open, setOpen] = useState(false);
  const [metadata, setMetadata] = useState<Record<string, unknown> | null>(null);
  const [saved, setSaved] = useState<ChatSettings>({});
  const [draft, setDraft] = useState<Draft>(toDraft({}));
  const [status, setStatus] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const { models } = useModels();
  const panel = useRef<HTMLFormElement>(null);
  const button = useRef<HTMLButtonElement>(null);
  const id = useId();

  useEffect(() => {
    let live = true;
    void getThread(threadId)
      .then((t) => {
        if (!live || !t) return;
        const s = settingsFrom(t.metadata);
        rememberSettings(threadId, s);
        setMetadata(t.metadata);
        setSaved(s);
      })
      .catch(() => {});
    return () => {
      live = false;
    };
  }, [threadId]);

  const show = () => {
    setDraft(toDraft(saved));
    setStatus(null);
    setError(null);
    setOpen(true);
    requestAnimationFrame(() => panel.current?.querySelector<HTMLElement>("textarea")?.focus());
  };
  const hide = () => {
    setOpen(false);
    button.current?.focus();
  };

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const s = fromDraft(draft);
    if (typeof s === "string") {
      setError(s);
      return;
    }
    setError(null);
    try {
      await saveSettings(threadId, metadata, s);
      setSaved(s);
      setStatus("Saved. The next reply uses these settings.");
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    }
  };

  const count = Object.keys(saved).length;
  return (
    <div className="settings-pop">
      <button
        ref={button}
        type="button"
        className="button"
        data-testid="settings-open"
        aria-expanded={open}
        aria-controls={`${id}-panel`}
        onClick={() => (open ? hide() : show())}
      >
        Settings{count ? ` (${count})` : ""}
      </button>
      {open ? (
        <form
          id={`${id}-panel`}
          ref={panel}
          role="dialog"
          aria-label="Chat settings"
          className="settings-panel"
          data-testid="settings-panel"
          // Our own checks say what is wrong (role=alert), not the browser's bubbles.
          noValidate
          onSubmit={(e) => void submit(e)}
          onKeyDown={(e) => {
            if (e.key === "Escape") {
              e.preventDefault();
              hide();
            }
          }}
        >
          <label>
            <span>System prompt</span>
            <textarea
              rows={3}
              value={draft.system}
              data-testid="settings-system"
              onChange={(e) => setDraft({ ...draft, system: e.target.value })}
            />
          </label>
          <label>
            <span>Temperature (0–2, empty: the model&apos;s default)</span>
            <input
              type="number"
              min={0}
              max={2}
              step={0.1}
              value={draft.temperature}
              data-testid="settings-temperature"
              onChange={(e) => setDraft({ ...draft, temperature: e.target.value })}
            />
          </label>
          <label>
            <span>Model</span>
            <select value={draft.model} data-testid="settings-model" onChange={(e) => setDraft({ ...draft, model: e.target.value })}>
              <option value="">As the model picker says</option>
              {models.map((m) => (
                <option key={m.name} value={m.name} disabled={m.configured === false}>
                  {modelLabel(m)}
                </option>
              ))}
            </select>
          </label>
          <label>
            <span>Max steps (1–100, empty: the service&apos;s default)</span>
            <input
              type="number"
              min={1}
              max={100}
              step={1}
              value={draft.max_steps}
              data-testid="settings-max-steps"
              onChange={(e) => setDraft({ ...draft, max_steps: e.target.value })}
            />
          </label>
          {error ? (
            <p className="fork-error" role="alert">
              {error}
            </p>
          ) : null}
          <p className="muted small" role="status" aria-live="polite">
            {status}
          </p>
          <div className="edit-actions">
            <button type="button" className="button" onClick={hide}>
              Close
            </button>
            <button type="submit" className="button primary" data-testid="settings-save">
              Save
            </button>
          </div>
        </form>
      ) : null}
    </div>
  );
};
