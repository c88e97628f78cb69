// The web app is not Go, but some npm packages in node_modules ship Go
// files; this empty module keeps them out of the main module's ./... .
module threadline/frontend
