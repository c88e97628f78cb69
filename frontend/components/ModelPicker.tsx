"use client";

// Which model runs use (run_config.model), from GET /api/v1/models: on the
// welcome page and in every chat, shown when the service offers more than
// one. Each model once; the service's default is marked and sends no
// run_config. The choice is kept per browser.

import { useEffect, useState, type FC } from "react";
import { listModels, getSelectedModel, setSelectedModel, type ModelInfo } from "@/lib/api";
import { OUTAGE, backoff, isOutage } from "@/lib/outage";

let cached: Promise<ModelInfo[]> | null = null;

/**
 * The service's models, fetched once per page load; failed: the service
 * could not be reached, asked again with backoff until it answers.
 */
export function useModels(): { models: ModelInfo[]; failed: boolean } {
  const [state, setState] = useState<{ models: ModelInfo[]; failed: boolean }>({ models: [], failed: false });
  useEffect(() => {
    let live = true;
    let timer: ReturnType<typeof setTimeout> | null = null;
    const load = (attempt: number) => {
      cached ??= listModels();
      cached.then(
        (models) => {
          if (live) setState({ models, failed: false });
        },
        (err: unknown) => {
          cached = null;
          if (!live) return;
          setState({ models: [], failed: isOutage(err) });
          if (isOutage(err)) timer = setTimeout(() => load(attempt + 1), backoff(attempt));
        },
      );
    };
    load(0);
    return () => {
      live = false;
      if (timer !== null) clearTimeout(timer);
    };
  }, []);
  return state;
}

export function modelLabel(m: ModelInfo): string {
  return `${m.name}${m.default ? " (default)" : ""}${m.configured === false ? " (not configured: needs an API key)" : ""}`;
}

export const ModelPicker: FC = () => {
  const { models, failed } = useModels();
  const [picked, setPicked] = useState<string | null>(null);
  if (failed) {
    return (
      <span className="model-picker muted" role="status" data-testid="models-unavailable">
        Models: {OUTAGE}
      </span>
    );
  }
  if (models.length < 2) return null;
  const fallback = models.find((m) => m.default)?.name ?? models[0]!.name;
  const stored = picked ?? getSelectedModel();
  const value = stored && models.some((m) => m.name === stored) ? stored : fallback;
  const chosen = models.find((m) => m.name === value);
  return (
    <>
    <label className="model-picker">
      <span className="muted">Model</span>
      <select
        aria-label="Model"
        value={value}
        onChange={(e) => {
          const name = e.target.value;
          setPicked(name);
          // The default is what the service picks anyway: no run_config.
          setSelectedModel(name === fallback ? "" : name);
        }}
      >
        {models.map((m) => (
          <option key={m.name} value={m.name} data-configured={m.configured === false ? "false" : "true"}>
            {modelLabel(m)}
          </option>
        ))}
      </select>
    </label>
    {chosen?.configured === false ? (
      // Said before sending: a run on it would fail with model_not_configured.
      <p className="model-warning small" role="note" data-testid="model-not-configured">
        {chosen.name} is not configured: its provider&apos;s API key is not set, so a reply will fail. Set the key
        and restart Threadline, or pick another model.
      </p>
    ) : null}
    </>
  );
};
