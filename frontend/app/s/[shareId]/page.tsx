import { SharedView } from "@/components/SharedView";

export const metadata = { title: "Shared conversation · Threadline" };

export default async function SharePage({ params }: { params: Promise<{ shareId: string }> }) {
  const { shareId } = await params;
  return <SharedView key={shareId} shareId={shareId} />;
}
