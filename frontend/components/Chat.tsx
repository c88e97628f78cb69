"use client";

import { AssistantRuntimeProvider } from "@assistant-ui/react";
import { Suspense, useEffect, useState, type FC } from "react";
import { NotFoundView } from "@/app/not-found";
import { THREADS_CHANGED, getThread } from "@/lib/api";
import { backoff, isOutage } from "@/lib/outage";
import { ThreadIdContext } from "./context";
import { BranchTreeButton } from "./BranchTree";
import { ChatSettingsButton } from "./ChatSettings";
import { ExportMenu } from "./LibraryActions";
import { ModelPicker } from "./ModelPicker";
import { SearchFocus } from "./SearchFocus";
import { Thread } from "./Thread";
import { useDocumentTitle } from "./useDocumentTitle";
import { useThreadlineRuntime } from "./useThreadlineRuntime";

/** The thread's title, reloaded when a run starts or ends (a title may come with it). */
function useThreadTitle(threadId: string): string | null {
  const [title, setTitle] = useState<string | null>(null);
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
          if (live) setTitle(t?.title ?? null);
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
  return title;
}

export const Chat: FC<{ threadId: string }> = ({ threadId }) => {
  const { runtime, notice, dismissNotice, notify, notFound, loaded, repository, setHead } = useThreadlineRuntime(threadId);
  const title = useThreadTitle(threadId);
  // The browser tab says which conversation it is.
  useDocumentTitle(notFound ? "Not found · Threadline" : title ? `${title} · Threadline` : "New chat · Threadline");
  if (notFound) return <NotFoundView what="conversation" />;
  return (
    <ThreadIdContext.Provider value={threadId}>
      <AssistantRuntimeProvider runtime={runtime}>
        <Thread notice={notice} onDismissNotice={dismissNotice} onRefused={notify} toolbar={
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
    </ThreadIdContext.Provider>
  );
};
