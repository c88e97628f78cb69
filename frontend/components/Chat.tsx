"use client";

import { AssistantRuntimeProvider } from "@assistant-ui/react";
import { Suspense, useEffect, useState, type FC } from "react";
import { NotFoundView } from "@/app/not-found";
import { THREADS_CHANGED, getThread } from "@/lib/api";
import type { ThreadSummary } from "@/lib/types";
import { backoff, isOutage } from "@/lib/outage";
import { SubagentLoaderContext, ThreadIdContext } from "./context";
import { SubagentOrigin } from "./SubagentOrigin";
import { BranchTreeButton } from "./BranchTree";
import { ChatSettingsButton } from "./ChatSettings";
import { ExportMenu } from "./LibraryActions";
import { ModelPicker } from "./ModelPicker";
import { SearchFocus } from "./SearchFocus";
import { Thread } from "./Thread";
import { useDocumentTitle } from "./useDocumentTitle";
import { useThreadlineRuntime } from "./useThreadlineRuntime";

type ThreadInfo = { title: string | null; parent: ThreadSummary["parent"] };

/** The thread's title (and parent, for a sub-agent's), reloaded when a run starts or ends (a title may come with it). */
function useThreadInfo(threadId: string): ThreadInfo {
  const [info, setInfo] = useState<ThreadInfo>({ title: null, parent: null });
  useEffect(() => {
    let live = true;
    let timer: ReturnType<typeof setTimeout> | null = null;
    let failures = 0;
    const load = () => {
      if (timer !== null) clearTimeout(timer);
      timer = null;
      getThread(threadId).then(
        (t) => {
          failures = 0;
          if (live) setInfo({ title: t?.title ?? null, parent: t?.parent ?? null });
        },
        (err: unknown) => {
          // Unreachable: asked again until the service answers.
          if (live && isOutage(err)) timer = setTimeout(load, backoff(failures++));
        },
      );
    };
    load();
    window.addEventListener(THREADS_CHANGED, load);
    return () => {
      live = false;
      if (timer !== null) clearTimeout(timer);
      window.removeEventListener(THREADS_CHANGED, load);
    };
  }, [threadId]);
  return info;
}

export const Chat: FC<{ threadId: string }> = ({ threadId }) => {
  const { runtime, notice, dismissNotice, notify, notFound, loaded, repository, setHead, loadSubagent } = useThreadlineRuntime(threadId);
  const { title, parent } = useThreadInfo(threadId);
  // The browser tab says which conversation it is.
  useDocumentTitle(notFound ? "Not found · Threadline" : title ? `${title} · Threadline` : "New chat · Threadline");
  if (notFound) return <NotFoundView what="conversation" />;
  return (
    <ThreadIdContext.Provider value={threadId}>
      <SubagentLoaderContext.Provider value={loadSubagent}>
      <AssistantRuntimeProvider runtime={runtime}>
        <Thread banner={parent ? <SubagentOrigin parent={parent} /> : null} notice={notice} onDismissNotice={dismissNotice} onRefused={notify} toolbar={
            <>
              <ModelPicker />
              <ChatSettingsButton threadId={threadId} />
              <BranchTreeButton repository={repository} setHead={setHead} />
              <ExportMenu threadId={threadId} />
            </>
          } />
        <Suspense fallback={null}>
          <SearchFocus loaded={loaded} repository={repository} setHead={setHead} />
        </Suspense>
      </AssistantRuntimeProvider>
      </SubagentLoaderContext.Provider>
    </ThreadIdContext.Provider>
  );
};
