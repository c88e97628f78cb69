"use client";

// Which model runs use (run_config.model), from GET /api/v1/models. Shown
// only when the service offers more than one; the choice is kept per browser.

import { useEffect, useState, type FC } from "react";
import { listModels, getSelectedModel, setSelectedModel, type ModelInfo } from "@/lib/api";

export const ModelPicker: FC = () => {
  const [models, setModels] = useState<ModelInfo[]>([]);
  const [value, setValue] = useState("");
  useEffect(() => {
    let live = true;
    listModels()
      .then((list) => {
        if (!live) return;
        setModels(list);
        const stored = getSelectedModel();
        setValue(stored && list.some((m) => m.name === stored) ? stored : "");
      })
      .catch(() => {});
    return () => {
      live = false;
    };
  }, []);
  if (models.length < 2) return null;
  const fallback = models.find((m) => m.default)?.name ?? "default";
  return (
    <label className="model-picker">
      <span className="muted">Model</span>
      <select
        aria-label="Model"
        value={value}
        onChange={(e) => {
          setValue(e.target.value);
          setSelectedModel(e.target.value);
        }}
      >
        <option value="">{`${fallback} (default)`}</option>
        {models.map((m) => (
          <option key={m.name} value={m.name}>
            {m.name}
            {m.configured === false ? " (not configured)" : ""}
          </option>
        ))}
      </select>
    </label>
  );
};
