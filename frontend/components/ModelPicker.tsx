"use client";

// Which model runs use (run_config.model), from GET /api/v1/models: on the
// welcome page and in every chat, shown when the service offers more than
// one. Each model once; the service's default is marked and sends no
// run_config. The choice is kept per browser.

import { useEffect, useState, type FC } from "react";
import { listModels, getSelectedModel, setSelectedModel, type ModelInfo } from "@/lib/api";

let cached: Promise<ModelInfo[]> | null = null;

/** The service's models, fetched once per page load. */
export function useModels(): ModelInfo[] {
  const [models, setModels] = useState<ModelInfo[]>([]);
  useEffect(() => {
    let live = true;
    cached ??= listModels().catch(() => {
      cached = null;
      return [];
    });
    void cached.then((list) => {
      if (live) setModels(list);
    });
    return () => {
      live = false;
    };
  }, []);
  return models;
}

export function modelLabel(m: ModelInfo): string {
  return `${m.name}${m.default ? " (default)" : ""}${m.configured === false ? " (not configured: needs an API key)" : ""}`;
}

export const ModelPicker: FC = () => {
  const models = useModels();
  const [picked, setPicked] = useState<string | null>(null);
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
