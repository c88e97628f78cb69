"use client";

// A sub-agent's thread says where it came from: the parent conversation
// (its title, a link back to it).

import Link from "next/link";
import { useEffect, useState, type FC } from "react";
import { getThread } from "@/lib/api";
import type { ThreadSummary } from "@/lib/types";
import "./subagents.css";

export const SubagentOrigin: FC<{ parent: NonNullable<ThreadSummary["parent"]> }> = ({ parent }) => {
  const [title, setTitle] = useState<string | null>(null);
  useEffect(() => {
    let live = true;
    getThread(parent.thread_id).then(
      (t) => {
        if (live) setTitle(t?.title ?? null);
      },
      () => {
        /* the link still goes back; it says "a conversation" */
      },
    );
    return () => {
      live = false;
    };
  }, [parent.thread_id]);
  return (
    <p className="subagent-origin" data-testid="subagent-origin">
      Sub-agent of{" "}
      <Link href={`/chat/${parent.thread_id}`} data-testid="subagent-parent">
        {title ?? "a conversation"}
      </Link>
    </p>
  );
};
