//! Pages' forms, read and posted the way a browser without JavaScript does.

use super::{TestApp, text, visible};

/// One form of a page as the browser would send it: where it posts and the
/// values of its inputs (hidden ones included, escapes undone).
#[derive(Debug, Clone)]
pub struct Form {
    pub action: String,
    pub fields: Vec<(String, String)>,
}

impl Form {
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The value of `name="…"` inside one tag's text.
fn attribute(tag: &str, name: &str) -> Option<String> {
    let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
    let end = tag[start..].find('"')? + start;
    Some(text(&tag[start..end]))
}

/// Every `<form>` of a page, with its action and its inputs' values.
pub fn forms(html: &str) -> Vec<Form> {
    html.split("<form")
        .skip(1)
        .filter_map(|chunk| {
            let body = chunk.split("</form>").next()?;
            let head = &body[..body.find('>')?];
            let action = attribute(head, "action")?;
            // Choices (radio buttons, check boxes) are the person's to make:
            // left out, as a browser leaves out what is not ticked.
            let fields = body
                .split("<input")
                .skip(1)
                .filter_map(|input| {
                    let tag = &input[..input.find('>')?];
                    let kind = attribute(tag, "type").unwrap_or_default();
                    if kind == "radio" || kind == "checkbox" {
                        return None;
                    }
                    Some((
                        attribute(tag, "name")?,
                        attribute(tag, "value").unwrap_or_default(),
                    ))
                })
                .collect();
            Some(Form { action, fields })
        })
        .collect()
}

/// Posts `fields` to `action` the way a browser without JavaScript does
/// from the page at `page` (a path): it asks for HTML and names the page.
pub async fn post_as_browser(
    app: &TestApp,
    client: &reqwest::Client,
    page: &str,
    action: &str,
    fields: &[(&str, &str)],
) -> reqwest::Response {
    client
        .post(app.url(action))
        .header("sec-fetch-site", "same-origin")
        .header("accept", "text/html,application/xhtml+xml")
        .header("referer", app.url(page))
        .form(fields)
        .send()
        .await
        .expect("the server answers")
}

/// The text of the action answer a page shows (`.outcome`), if any.
pub fn answer_shown(html: &str) -> Option<String> {
    let start = html.find("class=\"outcome ")?;
    let body = &html[start..];
    let end = body.find("</p>")?;
    let open = body.find('>')? + 1;
    Some(visible(&body[open..end]))
}

/// Where a redirect points.
pub fn location(response: &reqwest::Response) -> String {
    response
        .headers()
        .get("location")
        .map(|l| l.to_str().unwrap().to_owned())
        .unwrap_or_default()
}
