import { Welcome } from "@/components/Welcome";

export default function WelcomePage() {
  return <Welcome />;
}
