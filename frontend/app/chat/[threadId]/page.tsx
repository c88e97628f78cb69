import { notFound } from "next/navigation";
import { Chat } from "@/components/Chat";
import { UUID_RE } from "@/lib/api";

export default async function ChatPage({ params }: { params: Promise<{ threadId: string }> }) {
  const { threadId } = await params;
  if (!UUID_RE.test(threadId)) notFound();
  // Keyed: another thread is another runtime, with nothing carried over.
  return <Chat key={threadId} threadId={threadId} />;
}
