import { createContext } from "react";

/** The open thread's id, for the parts that ask the service about a reply. */
export const ThreadIdContext = createContext<string | null>(null);

/**
 * Loads a delegate call's child thread into the call (lib/controller.ts,
 * loadSubagent); null where no controller runs (a shared view).
 */
export const SubagentLoaderContext = createContext<
  ((messageId: string, toolCallId: string, ref: { thread_id: string; run_id: string }, path?: readonly string[]) => Promise<void>) | null
>(null);
