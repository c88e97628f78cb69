package main
import (
 _ "github.com/labstack/echo/v4"
 _ "github.com/jackc/pgx/v5"
 _ "github.com/jackc/pgx/v5/pgxpool"
 _ "github.com/google/uuid"
 _ "github.com/tmc/langchaingo/llms/openai"
 _ "github.com/tmc/langchaingo/llms/anthropic"
 _ "github.com/tmc/langchaingo/llms/ollama"
 _ "github.com/tmc/langchaingo/llms/googleai"
 _ "github.com/golang-migrate/migrate/v4"
 _ "github.com/golang-migrate/migrate/v4/source/iofs"
 _ "github.com/golang-migrate/migrate/v4/database/pgx/v5"
 _ "github.com/prometheus/client_golang/prometheus"
)
func main(){}
