"use client";

// Starter prompts on the welcome page: what the built-in demo model can
// show (a tool call, a plan, a long-running tool, a question for you,
// files, sub-agents). A click sends the prompt as the first message.

import type { FC } from "react";
import "./branches.css";

export const STARTERS: readonly { prompt: string; shows: string }[] = [
  { prompt: "What is 12*7?", shows: "a tool call (calculator)" },
  { prompt: "Make a plan to repaint the kitchen", shows: "a plan that ticks off" },
  { prompt: "Wait 3 seconds", shows: "a long-running tool" },
  { prompt: "Ask me a question", shows: "a question for you to answer" },
  { prompt: "Write three files", shows: "files the turn produced" },
  { prompt: "Research three options in parallel", shows: "three sub-agents working at once" },
];

export const Starters: FC<{ onPick: (prompt: string) => void }> = ({ onPick }) => (
  <nav aria-label="Starter prompts">
    <ul className="starters" data-testid="starters">
      {STARTERS.map((s) => (
        <li key={s.prompt}>
          <button type="button" className="button" data-testid="starter" title={`Shows ${s.shows}`} onClick={() => onPick(s.prompt)}>
            {s.prompt}
          </button>
        </li>
      ))}
    </ul>
  </nav>
);
