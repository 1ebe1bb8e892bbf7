"""Background jobs: flows declared `background` run as a job when an HTTP request says `"async": true`
(`queue.JobQueue`), persisted one file per job (`files.JobFiles`) so that they survive a restart. docs/jobs.md."""
